// Package browsertest starts the headless Chromium that page tests drive
// through chromedp: Debian's `chromium` (or chromium-browser, google-chrome)
// with the flags a container needs — headless, no sandbox when running as
// root, no GPU, /tmp instead of a small /dev/shm. Without a browser the
// test is skipped with a message, except under CI=1 where it fails: CI
// must install `chromium` (and `fonts-dejavu-core` for legible text).
package browsertest

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// Path finds a Chromium binary: $PERFGATE_CHROMIUM, then the usual names.
func Path() (string, bool) {
	if p := os.Getenv("PERFGATE_CHROMIUM"); p != "" {
		return p, true
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// Start launches one browser for the test and returns a context for its
// first tab; more tabs come from chromedp.NewContext(ctx). The browser
// stops when the test ends.
func Start(t testing.TB) context.Context {
	t.Helper()
	path, ok := Path()
	if !ok {
		msg := "no Chromium found (apt-get install chromium, or set PERFGATE_CHROMIUM): browser tests skipped"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(1280, 1000),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	// The first run starts the browser and must not carry a timeout: the
	// browser lives as long as that run's context.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start %s: %v", path, err)
	}
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return ctx
}

// Screenshot decodes a PNG screenshot and, when $PERFGATE_SCREENSHOTS
// names a directory, saves it there as name.png for a person to look at.
func Screenshot(t testing.TB, name string, png_ []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(png_))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if dir := os.Getenv("PERFGATE_SCREENSHOTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(dir, name+".png"), png_, 0o644)
		}
	}
	return img
}

// Count returns how many pixels of img within r are within tol (per
// channel, 0–255) of c.
func Count(img image.Image, r image.Rectangle, c color.RGBA, tol int) int {
	n := 0
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(int(pr>>8), int(c.R), tol) && near(int(pg>>8), int(c.G), tol) && near(int(pb>>8), int(c.B), tol) {
				n++
			}
		}
	}
	return n
}

// Distinct counts the distinct colours in r (quantised to 4 bits per
// channel): a blank or single-colour region has one or two.
func Distinct(img image.Image, r image.Rectangle) int {
	seen := map[[3]uint32]bool{}
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y += 2 {
		for x := r.Min.X; x < r.Max.X; x += 2 {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			seen[[3]uint32{pr >> 12, pg >> 12, pb >> 12}] = true
		}
	}
	return len(seen)
}

func near(a, b, tol int) bool { return a-b <= tol && b-a <= tol }
