{{/* The chart's name: the app.kubernetes.io/name label. */}}
{{- define "coreio.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of the operator's Deployment, RBAC objects and PodDisruptionBudget. */}}
{{- define "coreio.operatorName" -}}
{{- printf "%s-coreio-operator" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of the `helm test` hook's objects. */}}
{{- define "coreio.testName" -}}
{{- printf "%s-coreio-test" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The operator's ServiceAccount: a fixed name, which the operator and the tests rely on. */}}
{{- define "coreio.serviceAccountName" -}}
coreio-operator
{{- end -}}

{{/*
The namespaces the operator manages, comma-separated: the release namespace and
operator.watchNamespaces. Its --namespace flags, its RoleBindings and NOTES all use this one list.
*/}}
{{- define "coreio.managedNamespaces" -}}
{{- uniq (prepend .Values.operator.watchNamespaces .Release.Namespace) | join "," -}}
{{- end -}}

{{/* The Installation's name, which the API server's Service, pods and Secrets are named after. */}}
{{- define "coreio.installationName" -}}
{{- .Values.installation.name | default "coreio" -}}
{{- end -}}

{{/*
The labels the operator puts on the API server's Service and pods (children.labels), which select
them; the argument is the Installation's name.
*/}}
{{- define "coreio.apiserverLabels" -}}
app.kubernetes.io/name: coreio
app.kubernetes.io/instance: {{ . }}
app.kubernetes.io/component: apiserver
{{- end -}}

{{/* The port the API server's pods listen on: installation.spec.pod.port, or the CRD's default. */}}
{{- define "coreio.apiserverPort" -}}
{{- dig "pod" "port" 8443 (.Values.installation.spec | default dict) | int -}}
{{- end -}}

{{/* The ClusterRole that lets a scraper read the API server's /metrics. */}}
{{- define "coreio.metricsReaderName" -}}
{{- printf "%s-coreio-metrics-reader" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "coreio.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "coreio.image" -}}
{{- $repository := required "image.repository is not set: no coreio image is published; build it from the repository's Dockerfile, push it, and pass --set image.repository=<registry>/coreio (see the chart's README)" .Values.image.repository -}}
{{- printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/*
Selector labels; stable across upgrades. Call with (dict "context" $ "component" "operator").
*/}}
{{- define "coreio.selectorLabels" -}}
app.kubernetes.io/name: {{ include "coreio.name" .context }}
app.kubernetes.io/instance: {{ .context.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* All standard labels; same argument as coreio.selectorLabels. */}}
{{- define "coreio.labels" -}}
{{ include "coreio.selectorLabels" . }}
app.kubernetes.io/version: {{ .context.Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .context.Release.Service }}
helm.sh/chart: {{ include "coreio.chart" .context }}
{{- end -}}

{{/* The restricted Pod Security profile, for every pod of the chart. */}}
{{- define "coreio.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "coreio.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
{{- end -}}

{{/*
Egress every pod of the chart's NetworkPolicies needs: DNS, and kube-apiserver on
networkPolicy.kubeAPIServerPorts. Both by port, to any address: DNS may be CoreDNS's pods, a
node-local cache on a link-local address or the node's resolver, and kube-apiserver is outside the
pod network at an address of each cluster's own (the `kubernetes` Service's endpoints).
*/}}
{{- define "coreio.clusterEgress" -}}
- ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
- ports:
    {{- range .Values.networkPolicy.kubeAPIServerPorts }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
{{- end -}}

{{/*
The ports of installation.spec.storage.etcd.endpoints, each once, in their order; 2379 for an
endpoint that names none.
*/}}
{{- define "coreio.etcdPorts" -}}
{{- $ports := list -}}
{{- range dig "storage" "etcd" "endpoints" list (.Values.installation.spec | default dict) -}}
{{- $port := regexFind ":[0-9]+$" (regexReplaceAll "^https?://" . "") | trimPrefix ":" -}}
{{- $ports = append $ports ($port | default "2379" | int) -}}
{{- end -}}
{{- uniq $ports | join "," -}}
{{- end -}}
