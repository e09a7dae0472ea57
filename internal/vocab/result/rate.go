package result

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Inf is an unlimited request rate.
var Inf = Rate(math.Inf(1))

// IsInf reports whether the rate is unlimited.
func (r Rate) IsInf() bool { return math.IsInf(float64(r), 1) }

// String prints "inf" or the number.
func (r Rate) String() string {
	if r.IsInf() {
		return "inf"
	}
	return strconv.FormatFloat(float64(r), 'g', -1, 64)
}

// ParseRate reads "inf" or a positive number of requests per second.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "inf" || s == "infinity" {
		return Inf, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 || math.IsNaN(v) {
		return 0, fmt.Errorf("request rate %q: want a positive number of requests/s or \"inf\"", s)
	}
	return Rate(v), nil
}

// MarshalJSON writes +Inf as "inf", the way vLLM does.
func (r Rate) MarshalJSON() ([]byte, error) {
	if r.IsInf() {
		return []byte(`"inf"`), nil
	}
	return json.Marshal(float64(r))
}

// UnmarshalJSON accepts a number, "inf", or Python's Infinity literal.
func (r *Rate) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	switch strings.ToLower(s) {
	case "inf", "infinity", "null", "":
		if s == "null" || s == "" {
			*r = 0
			return nil
		}
		*r = Inf
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("request_rate %s: %w", b, err)
	}
	*r = Rate(v)
	return nil
}
