package soak

import (
	"encoding/json"
	"math"
)

// sampleJSON is a Sample on the wire: an unknown value is null, since JSON
// has no NaN.
type sampleJSON struct {
	AtS           float64  `json:"at_s"`
	RSSBytes      *float64 `json:"rss_bytes"`
	GPUMemBytes   *float64 `json:"gpu_mem_bytes"`
	PrefixHitRate *float64 `json:"prefix_hit_rate"`
	KVUsage       *float64 `json:"kv_usage"`
	Preemptions   *float64 `json:"preemptions"`
	TTFTp50ms     *float64 `json:"ttft_p50_ms"`
	TPOTp50ms     *float64 `json:"tpot_p50_ms"`
	Requests      int      `json:"requests"`
}

// MarshalJSON writes unknown values as null.
func (s Sample) MarshalJSON() ([]byte, error) {
	return json.Marshal(sampleJSON{AtS: s.AtS, RSSBytes: known(s.RSSBytes), GPUMemBytes: known(s.GPUMemBytes),
		PrefixHitRate: known(s.PrefixHitRate), KVUsage: known(s.KVUsage), Preemptions: known(s.Preemptions),
		TTFTp50ms: known(s.TTFTp50ms), TPOTp50ms: known(s.TPOTp50ms), Requests: s.Requests})
}

// UnmarshalJSON reads null (or a missing key) as unknown.
func (s *Sample) UnmarshalJSON(b []byte) error {
	var w sampleJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = Sample{AtS: w.AtS, RSSBytes: orUnknown(w.RSSBytes), GPUMemBytes: orUnknown(w.GPUMemBytes),
		PrefixHitRate: orUnknown(w.PrefixHitRate), KVUsage: orUnknown(w.KVUsage), Preemptions: orUnknown(w.Preemptions),
		TTFTp50ms: orUnknown(w.TTFTp50ms), TPOTp50ms: orUnknown(w.TPOTp50ms), Requests: w.Requests}
	return nil
}

func known(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func orUnknown(p *float64) float64 {
	if p == nil {
		return Unknown
	}
	return *p
}
