package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Matrix is the reports of several scenarios (the experiment matrix of
// `aisched sim run DIR`) with a comparison of two of their policies across
// all of them, so that a change to a weight or a plugin shows what it does
// to every experiment at once.
type Matrix struct {
	// Reports are the scenarios run, in order.
	Reports []*Report
	// Base and Candidate are the policies compared, e.g.
	// default-scheduler and aisched.
	Base, Candidate string
	// Skipped are the scenarios not run, with the reason.
	Skipped []Skipped
}

// Skipped is a scenario that was not run.
type Skipped struct {
	Scenario, Reason string
}

// Comparison is one metric of one scenario under the two policies.
type Comparison struct {
	Scenario  string `json:"scenario"`
	Metric    string `json:"metric"`
	Base      any    `json:"base"`
	Candidate any    `json:"candidate"`
	// Verdict is better, worse or same for the candidate; "" when the
	// metric has no direction or a value is missing.
	Verdict string `json:"verdict,omitempty"`
}

// Compare lists, for every scenario with both policies, each metric's
// medians and whether the candidate does better.
func (m *Matrix) Compare() ([]Comparison, error) {
	var out []Comparison
	for _, r := range m.Reports {
		base, cand := r.policy(m.Base), r.policy(m.Candidate)
		if base == nil || cand == nil {
			continue
		}
		bs, err := base.Summary(r.Metrics)
		if err != nil {
			return nil, err
		}
		cs, err := cand.Summary(r.Metrics)
		if err != nil {
			return nil, err
		}
		for _, k := range r.Metrics {
			if k == curveKey {
				continue
			}
			c := Comparison{Scenario: r.Scenario, Metric: k, Base: bs[k], Candidate: cs[k]}
			b, bok := bs[k].(float64)
			v, vok := cs[k].(float64)
			if d := Metrics[k].Better; d != 0 && bok && vok {
				switch diff := (v - b) * float64(d); {
				case diff > 1e-9:
					c.Verdict = "better"
				case diff < -1e-9:
					c.Verdict = "worse"
				default:
					c.Verdict = "same"
				}
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func (r *Report) policy(name string) *Policy {
	for i := range r.Policies {
		if r.Policies[i].Name == name {
			return &r.Policies[i]
		}
	}
	return nil
}

// WriteMarkdown writes the comparison table, then each scenario's own
// table with every policy, then the scenarios skipped.
func (m *Matrix) WriteMarkdown(w io.Writer) error {
	rows, err := m.Compare()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Experiment matrix: %s against %s (medians over seeds)\n\n", m.Candidate, m.Base)
	fmt.Fprintf(w, "| scenario | metric | %s | %s | %s is |\n| --- | --- | --- | --- | --- |\n", m.Base, m.Candidate, m.Candidate)
	counts := map[string]int{}
	for _, c := range rows {
		counts[c.Verdict]++
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", c.Scenario, c.Metric, format(c.Base), format(c.Candidate), c.Verdict)
	}
	fmt.Fprintf(w, "\n%s: %d better, %d worse, %d the same.\n", m.Candidate, counts["better"], counts["worse"], counts["same"])
	var keys []string
	for _, r := range m.Reports {
		fmt.Fprintln(w)
		if err := r.writeTable(w); err != nil {
			return err
		}
		for _, k := range r.Metrics {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	writeMeanings(w, keys)
	if len(m.Skipped) > 0 {
		fmt.Fprintln(w, "\nNot run:")
		for _, s := range m.Skipped {
			fmt.Fprintf(w, "- %s: %s\n", s.Scenario, s.Reason)
		}
	}
	return nil
}

// WriteJSON writes {"base": ..., "candidate": ..., "comparison": [...],
// "scenarios": [<each report's JSON>], "skipped": [...]}.
func (m *Matrix) WriteJSON(w io.Writer) error {
	rows, err := m.Compare()
	if err != nil {
		return err
	}
	var scenarios []json.RawMessage
	for _, r := range m.Reports {
		var b strings.Builder
		if err := r.WriteJSON(&b); err != nil {
			return err
		}
		scenarios = append(scenarios, json.RawMessage(b.String()))
	}
	skipped := make([]map[string]string, len(m.Skipped))
	for i, s := range m.Skipped {
		skipped[i] = map[string]string{"scenario": s.Scenario, "reason": s.Reason}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{
		"base": m.Base, "candidate": m.Candidate, "comparison": rows, "scenarios": scenarios, "skipped": skipped,
	})
}
