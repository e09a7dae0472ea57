package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"

	"github.com/perfgate/perfgate/internal/runner/gpu"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// version is set at link time by release builds:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/perfgate
//
// Without it the module version from the build info is used (a
// pseudo-version or "(devel)" in a checkout, the tag after
// go install …@v1.2.3).
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
	info, _ := debug.ReadBuildInfo()
	v, commit, dirty := versionOf(version, info)
	fmt.Fprintf(w, "perfgate %s", v)
	if commit != "" {
		if dirty {
			commit += "-dirty"
		}
		fmt.Fprintf(w, " (commit %s)", commit)
	}
	fmt.Fprintf(w, " %s %s/%s, NVML telemetry %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, nvmlBuild())
}

// pseudoVersion is a Go pseudo-version (v0.0.0-20261204152133-01637ba0d1b5,
// possibly +dirty): since Go 1.24 `go build` in a git checkout stamps the
// main module with one, so the commit is known even where the vcs.*
// settings are not.
var pseudoVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+-(?:[0-9A-Za-z.]+\.)?[0-9]{14}-([0-9a-f]{12})(\+dirty)?$`)

// versionOf is what `perfgate version` says: the link-time stamp, else the
// module's version from the build info; the commit from the VCS settings,
// else from a pseudo-version. A build with neither says so and how to
// stamp one, instead of a bare "(devel)".
func versionOf(stamp string, info *debug.BuildInfo) (v, commit string, dirty bool) {
	v = stamp
	if info != nil {
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
		if m := pseudoVersion.FindStringSubmatch(info.Main.Version); commit == "" && m != nil {
			commit, dirty = m[1], m[2] != ""
		}
	}
	commit = rev.Log(commit)
	if v == "" || v == "(devel)" {
		v = "(devel)"
		if commit == "" {
			v = "(devel, built without VCS information: stamp with -ldflags -X main.version=…)"
		}
	}
	return v, commit, dirty
}

func nvmlBuild() string {
	if gpu.NVMLCompiledIn {
		return "compiled in"
	}
	return "not compiled in (agent builds add -tags nvml)"
}
