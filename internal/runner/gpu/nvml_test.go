//go:build linux && cgo && nvml

package gpu

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestOpenNVML calls the real library loader. Without a driver (the CI
// machine) it must fail cleanly with ErrUnavailable; a device function called
// after a failed Init would kill the test binary instead. With a driver (a
// GPU host) it reads every card once.
func TestOpenNVML(t *testing.T) {
	var logs bytes.Buffer
	p, err := OpenNVML(zerolog.New(&logs))
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("error %v does not wrap ErrUnavailable", err)
		}
		if !strings.Contains(err.Error(), "runs are recorded without GPU metrics") {
			t.Fatalf("error %q does not say what happens next", err)
		}
		if !strings.Contains(logs.String(), "GPU telemetry unavailable") || strings.Count(logs.String(), "\n") != 1 {
			t.Fatalf("want one log line, got %q", logs.String())
		}
		if _, err := OpenNVML(zerolog.Nop()); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("second open: %v", err)
		}
		t.Logf("no NVML here, as expected: %v", err)
		return
	}
	defer p.Close()
	infos, err := p.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		dev, err := p.Open(info.UUID)
		if err != nil {
			t.Fatal(err)
		}
		s, err := dev.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v\n%+v", info, s)
		if info.UUID == "" || info.Driver == "" || s.SMClockMHz == 0 {
			t.Errorf("card %+v sample %+v: missing core fields", info, s)
		}
	}
	if _, err := p.Open("GPU-00000000-0000-0000-0000-000000000000"); err == nil {
		t.Error("opening a missing UUID succeeded")
	}
}
