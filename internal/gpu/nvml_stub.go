//go:build !(linux && cgo)

package gpu

import (
	"fmt"

	"github.com/rs/zerolog"
)

// OpenNVML always fails in a build without cgo (or off Linux): go-nvml is a
// cgo package. Build with CGO_ENABLED=1 on the GPU host to get telemetry.
func OpenNVML(log zerolog.Logger) (Provider, error) {
	err := fmt.Errorf("%w: perfgate was built without cgo (rebuild with CGO_ENABLED=1 on Linux): runs are recorded without GPU metrics", ErrUnavailable)
	log.Warn().Err(err).Msg("GPU telemetry unavailable")
	return nil, err
}
