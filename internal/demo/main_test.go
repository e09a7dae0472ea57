package demo

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// perfgateBin is the perfgate binary the demo repository's engine command
// runs (`perfgate sim`), built once: in a test the running executable is
// the test binary, which cannot serve the engine.
var perfgateBin string

func TestMain(m *testing.M) {
	flag.Parse() // testing.Short needs the flags parsed
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testing.Short() {
		return m.Run() // the end-to-end tests that need it skip
	}
	if bin := os.Getenv("PERFGATE_BIN"); bin != "" {
		// A prebuilt perfgate: for a compiled test binary run where no Go
		// toolchain is (the real-engine benchmarks on a GPU host).
		perfgateBin = bin
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "perfgate-demo-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	perfgateBin = filepath.Join(dir, "perfgate")
	build := exec.Command("go", "build", "-o", perfgateBin, "github.com/perfgate/perfgate/cmd/perfgate")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build perfgate:", err)
		return 1
	}
	return m.Run()
}
