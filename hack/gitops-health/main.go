// Command horus-gitops-health says what the two GitOps tools would call each Kubernetes object it is
// given: Flux's health (kstatus, sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute, the library Flux's
// `wait: true` and `healthChecks` use) and an Argo CD Lua health check (run with gopher-lua, the
// interpreter Argo CD embeds, with the libraries Argo CD opens for a check from argocd-cm).
//
// hack/build-gitops-health.sh builds it from its Go modules; tests/e2e/test_gitops_health.py runs it
// on DLJobs read back from the local control plane. Usage:
//
//	horus-gitops-health -lua manifests/argocd/dljob-health.lua < dljob.json
//
// The input is one object or a List (`kubectl get dljobs -o json`); the output is a JSON array, one
// entry per object: {"namespace", "name", "kstatus": {"status", "message", "conditions"},
// "argocd": {"status", "message"}}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type kstatusResult struct {
	Status     string             `json:"status"`
	Message    string             `json:"message"`
	Conditions []status.Condition `json:"conditions"`
}

type argoResult struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

type verdict struct {
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	Kstatus   kstatusResult `json:"kstatus"`
	Argocd    *argoResult   `json:"argocd,omitempty"`
}

// Argo CD's health codes; anything else a script returns is reported as Unknown, as Argo CD does.
var argoCodes = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

func main() {
	script := flag.String("lua", "", "an Argo CD health check (Lua) to run on each object as `obj`")
	flag.Parse()
	if err := run(*script, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "horus-gitops-health:", err)
		os.Exit(1)
	}
}

func run(scriptPath string, in io.Reader, out io.Writer) error {
	raw, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	// Decoded as the API machinery decodes objects (whole numbers as int64), which kstatus expects.
	var doc map[string]any
	if err := utiljson.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("reading the object: %w", err)
	}
	objects := []map[string]any{doc}
	if items, ok := doc["items"].([]any); ok {
		objects = objects[:0]
		for _, item := range items {
			if obj, ok := item.(map[string]any); ok {
				objects = append(objects, obj)
			}
		}
	}
	script := ""
	if scriptPath != "" {
		raw, err := os.ReadFile(scriptPath)
		if err != nil {
			return err
		}
		script = string(raw)
	}
	verdicts := make([]verdict, 0, len(objects))
	for _, obj := range objects {
		u := &unstructured.Unstructured{Object: obj}
		res, err := status.Compute(u)
		if err != nil {
			return fmt.Errorf("kstatus on %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		v := verdict{
			Namespace: u.GetNamespace(),
			Name:      u.GetName(),
			Kstatus:   kstatusResult{Status: res.Status.String(), Message: res.Message, Conditions: res.Conditions},
		}
		if script != "" {
			health, err := argoHealth(obj, script)
			if err != nil {
				return fmt.Errorf("lua on %s/%s: %w", u.GetNamespace(), u.GetName(), err)
			}
			v.Argocd = health
		}
		verdicts = append(verdicts, v)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(verdicts)
}

// argoHealth runs a health check the way Argo CD runs one from argocd-cm: a fresh state without the
// standard libraries but package, base and table (no string, math or os: a script that needs them
// fails here as it would there), a one-second limit, the object as the global `obj`, and the returned
// table's status and message.
func argoHealth(obj map[string]any, script string) (*argoResult, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return nil, err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return nil, fmt.Errorf("expect table output from Lua script, not %s", l.Get(-1).Type())
	}
	result := &argoResult{Status: lua.LVAsString(ret.RawGetString("status")), Message: lua.LVAsString(ret.RawGetString("message"))}
	if !argoCodes[result.Status] {
		return &argoResult{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
	}
	return result, nil
}

// toLua converts a decoded JSON value as Argo CD converts an object: maps to tables with string keys,
// arrays to sequences, numbers to numbers, null to nil.
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(toLua(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), toLua(l, item))
		}
		return tbl
	}
	return lua.LNil
}
