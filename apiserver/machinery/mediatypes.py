"""The media types the server reads and writes, named once for the HTTP layer and the OpenAPI
documents that list them."""

from __future__ import annotations

JSON_TYPE = "application/json"
YAML_TYPE = "application/yaml"
JSON_PATCH_TYPE = "application/json-patch+json"
MERGE_PATCH_TYPE = "application/merge-patch+json"
STRATEGIC_PATCH_TYPE = "application/strategic-merge-patch+json"
APPLY_PATCH_TYPE = "application/apply-patch+yaml"
PROTOBUF_TYPE = "application/vnd.kubernetes.protobuf"
WATCH_STREAM_TYPE = "application/json;stream=watch"

# /openapi/v2 in gnostic's protobuf encoding: clients (client-go's discovery) ask for the older
# spelling with "@"; the server answers with the newer one, which it accepts as well.
OPENAPI_V2_PROTOBUF_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
OPENAPI_V2_PROTOBUF_TYPE_DEPRECATED = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
