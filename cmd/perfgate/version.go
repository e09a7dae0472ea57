package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/perfgate/perfgate/internal/gpu"
)

// version is set at link time by release builds:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/perfgate
//
// Without it the module version from the build info is used ("(devel)" in
// a checkout, the tag after go install …@v1.2.3).
var version = ""

func init() {
	register("version", command{summary: "print perfgate's version, commit and Go version", run: runVersion})
}

func runVersion(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("version", "")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "perfgate version: unexpected arguments %q\n", fs.Args())
		return 3
	}
	writeVersion(env.stdout)
	return 0
}

// writeVersion prints one line: version, commit when known, Go version,
// platform, and whether NVML telemetry is compiled in.
func writeVersion(w io.Writer) {
	v, commit, dirty := version, "", false
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(w, "perfgate %s", v)
	if commit != "" {
		if len(commit) > 12 {
			commit = commit[:12]
		}
		if dirty {
			commit += "-dirty"
		}
		fmt.Fprintf(w, " (commit %s)", commit)
	}
	fmt.Fprintf(w, " %s %s/%s, NVML telemetry %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, nvmlBuild())
}

func nvmlBuild() string {
	if gpu.NVMLCompiledIn {
		return "compiled in"
	}
	return "not compiled in (agent builds add -tags nvml)"
}
