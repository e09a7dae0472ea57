//go:build !(linux && cgo)

package gpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestOpenNVMLWithoutCgo(t *testing.T) {
	_, err := OpenNVML(zerolog.Nop())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "without cgo") {
		t.Fatalf("got %v, want ErrUnavailable saying the build lacks cgo", err)
	}
}
