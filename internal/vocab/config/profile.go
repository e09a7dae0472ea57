package config

import (
	"fmt"
	"strings"
	"time"
)

// Profile is the `profile:` section: how a runner takes a short profile
// of a pull request's base and head, and when perfgate asks for one.
type Profile struct {
	// OnRegression lists the tiers whose confirmed regression (a check
	// concluded regression) queues a profile of base and head on its own.
	// Default [merge]: the merge tier's verdicts are the confirmed ones, and
	// a profile costs two engine starts. `/perf profile` works on any tier.
	OnRegression []string `yaml:"on_regression"`
	// Requests is the load the profiler records, after the tier's warm-up.
	Requests int `yaml:"requests"`
	// Command, when set, replaces the engine's /start_profile and
	// /stop_profile: an argv template (ProfilePlaceholders) the runner
	// starts with the load and waits for, e.g. ["nsys", "profile",
	// "--attach-pid", "{{.PID}}", "--duration", "20", "-o", "{{.Out}}/trace"].
	// Every file it leaves in {{.Out}} is uploaded.
	Command []string `yaml:"command"`
	// Timeout bounds the profiling pass of one commit (load and command).
	Timeout Duration `yaml:"timeout"`
	// MaxBytes caps one uploaded trace file; the server has its own cap.
	MaxBytes int `yaml:"max_bytes"`
}

// ProfilePlaceholders are the fields profile.command may use: {{.Out}}
// (the directory whose files are uploaded), {{.PID}} (the engine's
// process; 0 for an image engine), {{.Port}} and {{.URL}} (the engine),
// {{.SHA}}, {{.Workdir}} and {{.Seconds}} (profile.timeout in seconds).
var ProfilePlaceholders = []string{"Out", "PID", "Port", "URL", "SHA", "Workdir", "Seconds"}

// Profile defaults.
const (
	DefaultProfileRequests = 64
	DefaultProfileTimeout  = 5 * time.Minute
	DefaultProfileMaxBytes = 256 << 20
	// MaxProfileRequests bounds the profiled load: a profile is a short
	// look at the scheduler, not a benchmark.
	MaxProfileRequests = 5000
)

func defaultProfile() Profile {
	return Profile{OnRegression: []string{"merge"}, Requests: DefaultProfileRequests,
		Timeout: Duration(DefaultProfileTimeout), MaxBytes: DefaultProfileMaxBytes}
}

// ProfilesOnRegression reports whether a regression concluded on tier
// queues a profile.
func (c *Config) ProfilesOnRegression(tier string) bool {
	for _, t := range c.Profile.OnRegression {
		if t == tier {
			return true
		}
	}
	return false
}

func (d *decoder) validateProfile(c *Config) {
	p := c.Profile
	for i, t := range p.OnRegression {
		if _, ok := c.Tiers[t]; !ok {
			d.errField(fmt.Sprintf("profile.on_regression[%d]", i), fmt.Sprintf("no tier %q", t), "name tiers defined under tiers:, e.g. [merge]")
		}
	}
	if p.Requests < 1 || p.Requests > MaxProfileRequests {
		d.errField("profile.requests", fmt.Sprintf("%d requests", p.Requests), fmt.Sprintf("profile between 1 and %d requests (default %d)", MaxProfileRequests, DefaultProfileRequests))
	}
	if p.Timeout.D() < 10*time.Second || p.Timeout.D() > time.Hour {
		d.errField("profile.timeout", fmt.Sprintf("timeout %s", p.Timeout), "between 10s and 1h (default 5m)")
	}
	if p.MaxBytes < 1<<10 || p.MaxBytes > 4<<30 {
		d.errField("profile.max_bytes", fmt.Sprintf("%d bytes", p.MaxBytes), "between 1 KiB and 4 GiB (default 256 MiB)")
	}
	for i, arg := range p.Command {
		d.checkProfileTemplate(fmt.Sprintf("profile.command[%d]", i), arg)
	}
	if len(p.Command) > 0 && !strings.Contains(strings.Join(p.Command, " "), "{{.Out}}") {
		d.errField("profile.command", "the command never names {{.Out}}", "write the trace under {{.Out}}: only files there are uploaded")
	}
}

func (d *decoder) checkProfileTemplate(f, arg string) {
	d.checkTemplateOf(f, arg, ProfilePlaceholders, struct {
		Out, URL, SHA, Workdir string
		PID, Port, Seconds     int
	}{})
}
