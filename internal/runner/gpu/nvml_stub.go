//go:build !(linux && cgo && nvml)

package gpu

import (
	"fmt"
	"os"

	"github.com/rs/zerolog"
)

// NVMLCompiledIn reports whether this binary has the NVML bindings. They
// are built only with `-tags nvml` and cgo on Linux (the agent image and
// the agent's install instructions do that), so the server, the demo and
// the tests build without cgo and without go-nvml's C warnings.
const NVMLCompiledIn = false

// OpenNVML always fails in a build without NVML. The error says how to get
// telemetry; the caller logs it once.
func OpenNVML(log zerolog.Logger) (Provider, error) {
	why := "this perfgate binary was built without NVML"
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		why = "this host has an NVIDIA driver but this perfgate binary was built without NVML"
	}
	err := fmt.Errorf("%w: %s (build the agent with CGO_ENABLED=1 go build -tags nvml ./cmd/perfgate, or use the agent image): runs are recorded without GPU metrics", ErrUnavailable, why)
	log.Debug().Err(err).Msg("NVML not compiled in")
	return nil, err
}
