"""Builds the CEL cost oracle for the tests from Go modules, once, and caches it.

The oracle is upstream itself: a small Go program over k8s.io/apiserver's CEL environment (the
base environment of the pinned Kubernetes version, strict cost) and cel-go's runtime cost tracker.
It reads one JSON request a line (`{"expression": ..., "variables": {...}}`; a variable
`authorizer` given as a user name is that user's authorizer, granting nothing) and answers one JSON
line: `value` (as JSON, when it has one), `repr`, `cost` (the actual cost upstream counted),
`error` or `compile`. Tests hold coreio's cost accounting to its answers.

    python -m tests.support.celcost_build [--force]

prints the binary's path and how long getting it took. `CEL_COST_ORACLE_BIN` overrides the build.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support import gobuild
from tests.support.controlplane_build import kubernetes_version
from tests.support.gobuild import Build

_MODULE_PATH = "coreio.invalid/celcost"
_MAIN = """// Reads one JSON request a line ({"expression": ..., "variables": {...}}), compiles the expression
// in Kubernetes' admission CEL environment (base environment of the pinned version, strict cost,
// every variable dynamically typed) and answers one JSON line: the value, the actual cost
// upstream's runtime tracker counted, or the error.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"

	"github.com/google/cel-go/cel"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// noOpinion answers every check with NoOpinion, as an authorizer granting nothing does.
type noOpinion struct{}

func (noOpinion) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "", nil
}

type request struct {
	Expression string         `json:"expression"`
	Variables  map[string]any `json:"variables"`
}

type answer struct {
	Value   json.RawMessage `json:"value,omitempty"`
	Repr    string          `json:"repr,omitempty"`
	Cost    *uint64         `json:"cost,omitempty"`
	Error   string          `json:"error,omitempty"`
	Compile string          `json:"compile,omitempty"`
}

func environmentFor(names []string) (*cel.Env, error) {
	options := make([]cel.EnvOption, 0, len(names))
	for _, name := range names {
		if name == "authorizer" {
			options = append(options, cel.Variable(name, library.AuthorizerType))
		} else {
			options = append(options, cel.Variable(name, cel.DynType))
		}
	}
	base := environment.MustBaseEnvSet(version.MajorMinor(1, 33), true)
	extended, err := base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        options,
	})
	if err != nil {
		return nil, err
	}
	return extended.Env(environment.StoredExpressions)
}

func evaluate(req request) answer {
	names := make([]string, 0, len(req.Variables))
	for name := range req.Variables {
		names = append(names, name)
	}
	sort.Strings(names)
	env, err := environmentFor(names)
	if err != nil {
		return answer{Compile: err.Error()}
	}
	ast, issues := env.Compile(req.Expression)
	if issues.Err() != nil {
		return answer{Compile: issues.Err().Error()}
	}
	program, err := env.Program(ast, cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		return answer{Compile: err.Error()}
	}
	if username, ok := req.Variables["authorizer"].(string); ok {
		// The authorizer of `username`, which grants nothing.
		req.Variables["authorizer"] = library.NewAuthorizerVal(&user.DefaultInfo{Name: username}, noOpinion{})
	}
	out, details, err := program.Eval(req.Variables)
	result := answer{}
	if details != nil {
		result.Cost = details.ActualCost()
	}
	if err != nil {
		result.Error = err.Error()
		return result
	}
	result.Repr = fmt.Sprintf("%v", out)
	if native, convErr := out.ConvertToNative(reflect.TypeOf(&structpb.Value{})); convErr == nil {
		if encoded, encErr := protojson.Marshal(native.(*structpb.Value)); encErr == nil {
			result.Value = encoded
		}
	}
	return result
}

// unstructured gives JSON numbers the types Kubernetes' unstructured objects hold: int64 for
// integers, float64 for the rest.
func unstructured(value any) any {
	switch v := value.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i := range v {
			v[i] = unstructured(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = unstructured(v[k])
		}
	}
	return value
}

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	writer := bufio.NewWriter(os.Stdout)
	for scanner.Scan() {
		var req request
		var result answer
		decoder := json.NewDecoder(bytes.NewReader(scanner.Bytes()))
		decoder.UseNumber()
		if err := decoder.Decode(&req); err != nil {
			result = answer{Error: "bad request: " + err.Error()}
		} else {
			for name, value := range req.Variables {
				req.Variables[name] = unstructured(value)
			}
			result = evaluate(req)
		}
		encoded, _ := json.Marshal(result)
		writer.Write(encoded)
		writer.WriteString("\\n")
		writer.Flush()
	}
}
"""


def go_mod(version: str) -> str:
    staging = "v0." + version.removeprefix("v1.")
    return f"module {_MODULE_PATH}\n\ngo 1.24\n\nrequire k8s.io/apiserver {staging}\n"


def _build(version: str, work: Path, out: Path) -> None:
    (work / "go.mod").write_text(go_mod(version))
    (work / "main.go").write_text(_MAIN)
    gobuild.run_go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "celcost"), "."], work)


def recipe() -> gobuild.Recipe:
    version = kubernetes_version()
    return gobuild.Recipe(
        binary="celcost",
        version=version,
        # The program's own digest too: a changed oracle is built again, not found cached.
        directory=f"celcost-{version}-{hashlib.sha256(_MAIN.encode()).hexdigest()[:12]}",
        build=lambda work, out: _build(version, work, out),
        override="CEL_COST_ORACLE_BIN",
    )


def ensure_oracle(*, force: bool = False) -> Build:
    """The cached oracle, building it first when this machine has none yet."""
    return gobuild.ensure(recipe(), force=force)


class Oracle:
    """One running oracle process, asked one expression at a time."""

    def __init__(self, binary: Path) -> None:
        self._process = subprocess.Popen(
            [str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )

    def ask(self, expression: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """Upstream's answer for `expression` over `variables` (JSON values by name)."""
        assert self._process.stdin is not None and self._process.stdout is not None
        request = {"expression": expression, "variables": variables or {}}
        self._process.stdin.write(json.dumps(request) + "\n")
        answer: dict[str, Any] = json.loads(self._process.stdout.readline())
        return answer

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").split("\n\n")[0]
    return gobuild.main(
        argv, prog="python -m tests.support.celcost_build", description=description, recipe=recipe
    )


if __name__ == "__main__":
    sys.exit(main())
