package demo

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// perfgateBin is the perfgate binary the demo repository's engine command
// runs (`perfgate sim`), built once: in a test the running executable is
// the test binary, which cannot serve the engine.
var perfgateBin string

// scenarios is how many end-to-end scenarios run at once when go test is
// given no -parallel: each is its own server, store, runner and engine
// (ports picked by the kernel, a clock of its own), and each spends its
// time waiting on its engine's simulated decode steps, not on the CPU, so
// the default of GOMAXPROCS (two in CI) would leave the cores idle. It is
// more than the package has parallel scenarios (eight), so every one
// starts at once and the package takes as long as its slowest: with six,
// the scheduler scenario (the longest) waited for a slot.
const scenarios = 12

func TestMain(m *testing.M) {
	flag.Parse() // testing.Short needs the flags parsed
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(scenarios)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
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
