// Package report renders the results of `aisched sim`: JSON with fixed
// keys, a markdown table with the policies side by side, and CSV.
package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aisched/aisched/pkg/sim/metrics"
)

// Report is the outcome of a scenario.
type Report struct {
	// Scenario is the scenario's name.
	Scenario string
	// Metrics are the keys reported, in order.
	Metrics []string
	// Policies in the scenario's order.
	Policies []Policy
}

// Policy is the runs of one policy, one per seed.
type Policy struct {
	Name string
	Runs []Run
}

// Run is the result of one seed.
type Run struct {
	Seed   int64
	Result metrics.Result
}

// values returns a result's metrics by JSON key, only those in keys.
func values(r metrics.Result, keys []string) (map[string]any, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	all := map[string]any{}
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := all[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

// Summary returns a policy's metrics over its seeds: the median for a
// number (the mean of the middle two for an even count), the point-wise
// median for the unallocated-GPU curve, the value of the first seed that
// has one for anything else (percentiles).
func (p Policy) Summary(keys []string) (map[string]any, error) {
	var runs []map[string]any
	for _, r := range p.Runs {
		v, err := values(r.Result, keys)
		if err != nil {
			return nil, err
		}
		runs = append(runs, v)
	}
	out := map[string]any{}
	for _, k := range keys {
		if k == curveKey {
			if c := p.medianCurve(); len(c) > 0 {
				out[k] = c
			}
			continue
		}
		var nums []float64
		var other any
		for _, r := range runs {
			switch v := r[k].(type) {
			case float64:
				nums = append(nums, v)
			case nil:
			default:
				if other == nil {
					other = v
				}
			}
		}
		switch {
		case len(nums) > 0:
			out[k] = median(nums)
		case other != nil:
			out[k] = other
		}
	}
	return out, nil
}

// curveKey is the metric whose value is a curve.
const curveKey = "unallocated_gpu_pct_curve"

// median of values, the mean of the middle two for an even count; it
// sorts values.
func median(values []float64) float64 {
	sort.Float64s(values)
	m := values[len(values)/2]
	if len(values)%2 == 0 {
		m = (values[len(values)/2-1] + m) / 2
	}
	return m
}

// medianCurve is the point-wise median of the runs' curves: at each
// arrived percentage, the median of the runs that reached it.
func (p Policy) medianCurve() []metrics.CurvePoint {
	byPct := map[int][]float64{}
	for _, r := range p.Runs {
		for _, pt := range r.Result.UnallocatedGPUPctCurve {
			byPct[pt.ArrivedPct] = append(byPct[pt.ArrivedPct], pt.UnallocatedGPUPct)
		}
	}
	var out []metrics.CurvePoint
	for pct, values := range byPct {
		out = append(out, metrics.CurvePoint{ArrivedPct: pct, UnallocatedGPUPct: median(values)})
	}
	slices.SortFunc(out, func(a, b metrics.CurvePoint) int { return a.ArrivedPct - b.ArrivedPct })
	return out
}

// jsonRun and jsonPolicy are the JSON shapes.
type jsonRun struct {
	Seed    int64          `json:"seed"`
	Metrics map[string]any `json:"metrics"`
}

type jsonPolicy struct {
	Name    string         `json:"name"`
	Metrics map[string]any `json:"metrics"`
	Runs    []jsonRun      `json:"runs,omitempty"`
}

// WriteJSON writes {"scenario": ..., "policies": [{"name": ...,
// "metrics": {...}, "runs": [{"seed": ..., "metrics": {...}}]}]}; runs are
// listed when there are several seeds.
func (r *Report) WriteJSON(w io.Writer) error {
	out := struct {
		Scenario string       `json:"scenario"`
		Policies []jsonPolicy `json:"policies"`
	}{Scenario: r.Scenario}
	for _, p := range r.Policies {
		sum, err := p.Summary(r.Metrics)
		if err != nil {
			return err
		}
		jp := jsonPolicy{Name: p.Name, Metrics: sum}
		if len(p.Runs) > 1 {
			for _, run := range p.Runs {
				v, err := values(run.Result, r.Metrics)
				if err != nil {
					return err
				}
				jp.Runs = append(jp.Runs, jsonRun{Seed: run.Seed, Metrics: v})
			}
		}
		out.Policies = append(out.Policies, jp)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// WriteMarkdown writes a table with a row per metric and a column per
// policy (medians over seeds), each metric with the way it improves, and
// under it what each metric means.
func (r *Report) WriteMarkdown(w io.Writer) error {
	if err := r.writeTable(w); err != nil {
		return err
	}
	writeMeanings(w, r.Metrics)
	return nil
}

// Row is one metric of a report as the tables show it: its medians over
// seeds, formatted, one per policy in order, with the way it improves and
// what it means.
type Row struct {
	Metric  string   `json:"metric"`
	Better  string   `json:"better"`
	Meaning string   `json:"meaning"`
	Values  []string `json:"values"`
}

// Rows returns the report's metrics as Rows.
func (r *Report) Rows() ([]Row, error) {
	var sums []map[string]any
	for _, p := range r.Policies {
		sum, err := p.Summary(r.Metrics)
		if err != nil {
			return nil, err
		}
		sums = append(sums, sum)
	}
	rows := make([]Row, 0, len(r.Metrics))
	for _, k := range r.Metrics {
		row := Row{Metric: k, Better: Better(k), Meaning: Metrics[k].Meaning}
		for _, sum := range sums {
			row.Values = append(row.Values, format(sum[k]))
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// PolicyNames are the report's policies, in order.
func (r *Report) PolicyNames() []string {
	names := make([]string, len(r.Policies))
	for i, p := range r.Policies {
		names[i] = p.Name
	}
	return names
}

// writeTable writes WriteMarkdown's table.
func (r *Report) writeTable(w io.Writer) error {
	rows, err := r.Rows()
	if err != nil {
		return err
	}
	header := append([]string{"metric", "better"}, r.PolicyNames()...)
	fmt.Fprintf(w, "Scenario %s\n\n", r.Scenario)
	fmt.Fprintf(w, "| %s |\n", strings.Join(header, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat(" --- |", len(header)))
	for _, row := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(append([]string{row.Metric, row.Better}, row.Values...), " | "))
	}
	return nil
}

// WriteCSV writes one row per policy and seed, a column per scalar metric.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cols := slices.DeleteFunc(slices.Clone(r.Metrics), func(k string) bool {
		return k == curveKey || k == "group_wait_seconds" || k == "guarantee_wait_seconds" || k == "fair_share_deviation_gpus"
	})
	if err := cw.Write(append([]string{"policy", "seed"}, cols...)); err != nil {
		return err
	}
	for _, p := range r.Policies {
		for _, run := range p.Runs {
			v, err := values(run.Result, cols)
			if err != nil {
				return err
			}
			row := []string{p.Name, strconv.FormatInt(run.Seed, 10)}
			for _, k := range cols {
				row = append(row, format(v[k]))
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// format renders a metric value for a table cell.
func format(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case float64:
		// Three decimals: differences below are noise.
		return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
	case map[string]any:
		if p50, ok := v["p50"].(float64); ok {
			if p99, ok := v["p99"].(float64); ok {
				return fmt.Sprintf("p50 %s, p99 %s", format(p50), format(p99))
			}
			p95, _ := v["p95"].(float64)
			return fmt.Sprintf("p50 %s, p95 %s", format(p50), format(p95))
		}
		if mean, ok := v["mean"].(float64); ok {
			most, _ := v["max"].(float64)
			return fmt.Sprintf("mean %s, max %s", format(mean), format(most))
		}
	case []metrics.CurvePoint:
		points := make([]string, len(v))
		for i, p := range v {
			points[i] = fmt.Sprintf("%d%%: %.2f", p.ArrivedPct, p.UnallocatedGPUPct)
		}
		return strings.Join(points, ", ")
	}
	data, _ := json.Marshal(v)
	return string(data)
}
