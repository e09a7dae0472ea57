package gatetest

import "testing"

func TestCases(t *testing.T) {
	t.Parallel()
	cs, err := Cases()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		t.Logf("%s: %s — %s", c.Name, c.Report.Verdict, c.Report.Headline)
	}
}
