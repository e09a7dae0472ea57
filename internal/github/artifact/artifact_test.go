package artifact

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSaveOpenCap(t *testing.T) {
	t.Parallel()
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
	if _, err := d.Open("../../../etc/passwd"); err == nil {
		t.Error("Open accepted a path")
	}
}

// Sweep removes what no row references and abandoned uploads, but never a
// referenced file, a file younger than the cutoff, or a file not its own.
func TestSweep(t *testing.T) {
	t.Parallel()
	d, err := NewDir(filepath.Join(t.TempDir(), "artifacts"), 0)
	if err != nil {
		t.Fatal(err)
	}
	save := func(s string) string {
		t.Helper()
		sum, _, err := d.Save(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	now := time.Now()
	old := now.Add(-2 * time.Hour)
	age := func(path string, at time.Time) {
		t.Helper()
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	kept, orphan, young := save("kept trace"), save("orphan trace!"), save("young")
	age(d.path(kept), old)
	age(d.path(orphan), old)
	staleTmp := filepath.Join(d.Root(), "tmp", "upload-stale")
	freshTmp := filepath.Join(d.Root(), "tmp", "upload-fresh")
	foreign := filepath.Join(d.Root(), "README")
	for _, p := range []string{staleTmp, freshTmp, foreign} {
		if err := os.WriteFile(p, []byte("part"), 0o640); err != nil {
			t.Fatal(err)
		}
		age(p, old)
	}
	age(freshTmp, now)

	st, err := d.Sweep(map[string]bool{kept: true}, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if st != (SweepStats{Files: 1, Bytes: 13, Temps: 1, TempBytes: 4}) {
		t.Errorf("swept %+v, want the orphan (13 bytes) and one stale upload (4 bytes)", st)
	}
	for p, want := range map[string]bool{d.path(kept): true, d.path(orphan): false, d.path(young): true,
		staleTmp: false, freshTmp: true, foreign: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists=%v, want %v", p, err == nil, want)
		}
	}
}
