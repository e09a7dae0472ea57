package artifact

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSaveOpenCap(t *testing.T) {
	d, err := NewDir(filepath.Join(t.TempDir(), "artifacts"), 16)
	if err != nil {
		t.Fatal(err)
	}
	sum, n, err := d.Save(strings.NewReader("trace bytes"))
	if err != nil || n != 11 || len(sum) != 64 {
		t.Fatalf("save = %q %d %v", sum, n, err)
	}
	f, err := d.Open(sum)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "trace bytes" {
		t.Errorf("read back %q", b)
	}
	if _, _, err := d.Save(strings.NewReader(strings.Repeat("x", 17))); !errors.Is(err, ErrTooLarge) {
		t.Errorf("17 bytes under a 16-byte cap: %v, want ErrTooLarge", err)
	}
	if left, _ := os.ReadDir(filepath.Join(d.Root(), "tmp")); len(left) != 0 {
		t.Errorf("a refused upload left %d temporary files", len(left))
	}
	if _, err := d.Open("../../etc/passwd"); err == nil {
		t.Error("Open accepted a path")
	}
}
