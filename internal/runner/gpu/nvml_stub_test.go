//go:build !(linux && cgo && nvml)

package gpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestOpenNVMLWithoutCgo(t *testing.T) {
	_, err := OpenNVML(zerolog.Nop())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "built without NVML") {
		t.Fatalf("got %v, want ErrUnavailable saying the build lacks NVML", err)
	}
}
