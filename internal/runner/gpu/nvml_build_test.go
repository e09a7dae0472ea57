//go:build !nvml

package gpu

import (
	"os"
	"os/exec"
	"testing"
)

// The NVML code is compiled only with -tags nvml (the agent build), so the
// default test run would never see it break. Vet it with the tag here.
func TestNVMLBuildCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles go-nvml with cgo: skipped with -short")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no C compiler: the nvml build needs cgo")
	}
	cmd := exec.Command("go", "vet", "-tags", "nvml", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-Wno-deprecated-declarations")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet -tags nvml: %v\n%s", err, out)
	}
}
