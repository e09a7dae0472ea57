package fleet

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Fair-share granularity.
const (
	// ShareByRepository: every repository is its own tenant (the default).
	ShareByRepository = "repository"
	// ShareByInstallation: all repositories of one GitHub account (one
	// installation of the app) are one tenant.
	ShareByInstallation = "installation"
)

// Shares says who a job's GPU time is charged to and how much of the fleet
// each tenant is owed. Within a priority class the claim order gives every
// tenant with queued work a share of GPU time proportional to its weight
// (start-time fair queuing; see the store).
type Shares struct {
	// By is ShareByRepository (also when empty) or ShareByInstallation.
	By string
	// Weights maps "owner/name" or "owner" to a positive weight; a
	// repository without an entry takes its owner's, else 1.
	Weights map[string]float64
}

// Key is the tenant a job of repo ("owner/name") is charged to.
func (s Shares) Key(repo string) string {
	if s.By == ShareByInstallation {
		owner, _, _ := strings.Cut(repo, "/")
		return owner
	}
	return repo
}

// Weight is the weight of a tenant key (a repository or an owner).
func (s Shares) Weight(key string) float64 {
	if w, ok := s.Weights[key]; ok && w > 0 {
		return w
	}
	if owner, _, ok := strings.Cut(key, "/"); ok {
		if w, ok := s.Weights[owner]; ok && w > 0 {
			return w
		}
	}
	return 1
}

// Validate reports every problem of the settings at once.
func (s Shares) Validate() error {
	var problems []string
	if s.By != "" && s.By != ShareByRepository && s.By != ShareByInstallation {
		problems = append(problems, fmt.Sprintf("share_by %q: want %s or %s", s.By, ShareByRepository, ShareByInstallation))
	}
	keys := make([]string, 0, len(s.Weights))
	for k := range s.Weights {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w := s.Weights[k]
		if msg := checkKey(k); msg != "" {
			problems = append(problems, fmt.Sprintf("weight %q: %s", k, msg))
		}
		if !(w > 0) || math.IsInf(w, 0) || w > 1e6 {
			problems = append(problems, fmt.Sprintf("weight of %s is %g: want a positive number (1 is the default share)", k, w))
		}
		if s.By == ShareByInstallation && strings.Contains(k, "/") {
			problems = append(problems, fmt.Sprintf("weight %q names a repository, but share_by is installation: weigh the owner (%q)", k, strings.SplitN(k, "/", 2)[0]))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("fleet: %s", strings.Join(problems, "; "))
	}
	return nil
}

func checkKey(k string) string {
	owner, name, repo := strings.Cut(k, "/")
	switch {
	case owner == "":
		return "empty owner: write owner or owner/name"
	case repo && (name == "" || strings.Contains(name, "/")):
		return "write owner or owner/name"
	case strings.ContainsAny(k, " \t,="):
		return "no spaces, commas or = in a name"
	}
	return ""
}

// ParseWeights reads "acme/inference=4,acme=2" (the environment form).
func ParseWeights(v string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, w, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%q: write owner/name=WEIGHT or owner=WEIGHT, comma-separated", part)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(w), 64)
		if err != nil {
			return nil, fmt.Errorf("%q: weight %q is not a number", part, w)
		}
		out[strings.TrimSpace(k)] = f
	}
	return out, nil
}
