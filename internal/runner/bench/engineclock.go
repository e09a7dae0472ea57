package bench

import (
	"sort"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// engineClockOf sets the client's TTFT and TPOT beside the engine's own
// for the successful requests whose answers carried the engine's clock
// (more than one output token, so both TPOTs are defined); nil when none
// did. The client's TPOT is the one aggregate uses,
// (latency − TTFT)/(output tokens − 1).
func engineClockOf(recs []record) *result.EngineClock {
	var cTTFT, eTTFT, cTPOT, eTPOT, eStep, tpotGap, stepGap, wait, outs []float64
	for i := range recs {
		r := &recs[i]
		e := r.engine
		if !r.ok || e == nil || e.evalCount < 2 || e.eval <= 0 {
			continue
		}
		out, _ := r.outputTokens()
		if out < 2 {
			continue
		}
		client := (r.latency - r.ttft) / float64(out-1) * 1000
		tpot := e.eval.Seconds() * 1000 / float64(e.evalCount)
		step := e.eval.Seconds() * 1000 / float64(e.evalCount-1)
		cTTFT = append(cTTFT, r.ttft*1000)
		eTTFT = append(eTTFT, (e.load+e.promptEval).Seconds()*1000)
		cTPOT = append(cTPOT, client)
		eTPOT = append(eTPOT, tpot)
		eStep = append(eStep, step)
		tpotGap = append(tpotGap, client/tpot-1)
		stepGap = append(stepGap, client/step-1)
		wait = append(wait, (e.total-e.load-e.promptEval-e.eval).Seconds()*1000)
		outs = append(outs, float64(e.evalCount))
	}
	if len(cTPOT) == 0 {
		return nil
	}
	return &result.EngineClock{
		Engine:       "ollama",
		Requests:     len(cTPOT),
		ClientTTFTMS: median(cTTFT),
		EngineTTFTMS: median(eTTFT),
		ClientTPOTMS: median(cTPOT),
		EngineTPOTMS: median(eTPOT),
		EngineStepMS: median(eStep),
		TPOTGap:      median(tpotGap),
		StepGap:      median(stepGap),
		EngineWaitMS: median(wait),
		OutputTokens: median(outs),
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return percentile(s, 50)
}
