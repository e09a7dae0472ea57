package server

import (
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// LoadConfig reads the server configuration: defaults, then the YAML file
// at path (optional), then PERFGATE_* environment variables, which win so a
// deployment can keep secrets out of the file.
//
//	PERFGATE_ADDR, PERFGATE_DATABASE_URL, PERFGATE_PUBLIC_URL, PERFGATE_APP_SLUG,
//	PERFGATE_AGENT_REGISTRATION_TOKEN, PERFGATE_LEASE, PERFGATE_LONG_POLL,
//	PERFGATE_ESCALATE_EVERY, PERFGATE_NIGHTLY_CRON, PERFGATE_NIGHTLY_REPOS (comma-separated),
//	PERFGATE_GITHUB_V3_API_URL, PERFGATE_GITHUB_APP_INTEGRATION_ID,
//	PERFGATE_GITHUB_APP_WEBHOOK_SECRET, PERFGATE_GITHUB_APP_PRIVATE_KEY
func LoadConfig(path string) (Config, error) {
	cfg := Config{Addr: ":8080", DatabaseURL: "perfgate.db", AppSlug: "perfgate"}
	cfg.GitHub.V3APIURL = "https://api.github.com/"
	cfg.GitHub.V4APIURL = "https://api.github.com/graphql"
	cfg.GitHub.WebURL = "https://github.com"
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("read server config: %w", err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(data)))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil {
			return Config{}, fmt.Errorf("server config %s: %w", path, err)
		}
	}
	str := map[string]*string{
		"ADDR": &cfg.Addr, "DATABASE_URL": &cfg.DatabaseURL, "PUBLIC_URL": &cfg.PublicURL, "APP_SLUG": &cfg.AppSlug,
		"AGENT_REGISTRATION_TOKEN": &cfg.AgentRegistrationToken, "NIGHTLY_CRON": &cfg.NightlyCron,
		"DASHBOARD_SIGNING_KEY": &cfg.Dashboard.SigningKey, "CHANGEPOINTS_CRON": &cfg.ChangePoints.Cron,
	}
	for k, p := range str {
		if v, ok := os.LookupEnv("PERFGATE_" + k); ok {
			*p = v
		}
	}
	durs := map[string]*time.Duration{"LEASE": &cfg.Lease, "LONG_POLL": &cfg.LongPoll, "ESCALATE_EVERY": &cfg.EscalateEvery}
	for k, p := range durs {
		if v, ok := os.LookupEnv("PERFGATE_" + k); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return Config{}, fmt.Errorf("PERFGATE_%s=%q: want a duration such as 2m: %w", k, v, err)
			}
			*p = d
		}
	}
	if v, ok := os.LookupEnv("PERFGATE_NIGHTLY_REPOS"); ok {
		cfg.NightlyRepos = strings.Split(v, ",")
	}
	// go-githubapp reads its own variables but silently ignores a bad
	// integer: check the one that matters.
	if v, ok := os.LookupEnv("PERFGATE_GITHUB_APP_INTEGRATION_ID"); ok {
		var id int64
		if _, err := fmt.Sscan(v, &id); err != nil || id <= 0 {
			return Config{}, fmt.Errorf("PERFGATE_GITHUB_APP_INTEGRATION_ID=%q: want the app's positive integer ID", v)
		}
	}
	cfg.GitHub.SetValuesFromEnv("PERFGATE_")
	return cfg, nil
}
