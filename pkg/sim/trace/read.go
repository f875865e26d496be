package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Node is one row of an openb node list: sn,cpu_milli,memory_mib,gpu,model.
type Node struct {
	// Name is the node's serial number (column sn).
	Name string
	// MilliCPU is the node's CPU in thousandths of a core (cpu_milli).
	MilliCPU int64
	// MemoryMiB is the node's memory (memory_mib).
	MemoryMiB int64
	// GPUs is the number of cards (gpu), 0 for CPU-only nodes.
	GPUs int
	// Model is the card model as the trace names it (model), empty for
	// CPU-only nodes; NodeModel converts it.
	Model string
}

// Pod is one row of an openb pod list, in the 11-column form
// name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
// or the 5-column form name,cpu_milli,memory_mib,num_gpu,gpu_milli. Columns
// the file lacks are left zero.
type Pod struct {
	// Name is the pod's name.
	Name string
	// MilliCPU is the CPU request in thousandths of a core (cpu_milli).
	MilliCPU int64
	// MemoryMiB is the memory request (memory_mib).
	MemoryMiB int64
	// NumGPU is the number of cards (num_gpu), 0..64.
	NumGPU int
	// GPUMilli is the share of each card in thousandths (gpu_milli): 1..1000
	// for one card, 1000 for several, 0 for none.
	GPUMilli int64
	// GPUSpec lists the acceptable card models as the trace names them
	// (gpu_spec, split at "|"); nil accepts any.
	GPUSpec []string
	// QoS is the trace's QoS class (qos): LS, BE, Burstable, Guaranteed.
	QoS string
	// Phase is the pod's phase in the trace (pod_phase).
	Phase string
	// Creation, Deletion and Scheduled are the times of the trace in
	// seconds (creation_time, deletion_time, scheduled_time), 0 when absent
	// or empty (pending pods have no scheduled_time).
	Creation, Deletion, Scheduled int64
}

// TotalGPUMilli returns the pod's whole GPU request in thousandths of a card:
// num_gpu*1000 for a multi-GPU pod (the trace gives such pods gpu_milli
// 1000, the share of each card) and gpu_milli for one card.
func (p Pod) TotalGPUMilli() int64 {
	if p.NumGPU > 1 {
		return int64(p.NumGPU) * wholeCard
	}
	if p.NumGPU == 1 {
		return p.GPUMilli
	}
	return 0
}

// Shared reports whether the pod asks for part of one card.
func (p Pod) Shared() bool {
	return p.NumGPU == 1 && p.GPUMilli < wholeCard
}

const (
	// wholeCard is gpu_milli of a pod that takes a whole card.
	wholeCard = 1000
	// maxGPUs bounds num_gpu and a node's gpu, like pkg/gpu's card count;
	// more is certainly a mistake.
	maxGPUs = 64
	// noLimit leaves a column unbounded above.
	noLimit = math.MaxInt64
)

// ReadNodes parses an openb node list. name names the file in errors. It
// fails at the first bad row (see the package doc) and returns no nodes then.
// Node names must be unique.
func ReadNodes(r io.Reader, name string) ([]Node, error) {
	t, err := newTable(r, name, []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"}, nil)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	return readRows(t, func() Node {
		return Node{
			Name:      t.name("sn", seen),
			MilliCPU:  t.num("cpu_milli", noLimit),
			MemoryMiB: t.num("memory_mib", noLimit),
			GPUs:      int(t.num("gpu", maxGPUs)),
			Model:     t.text("model"),
		}
	})
}

// ReadPods parses an openb pod list in either form. name names the file in
// errors. It fails at the first bad row (see the package doc) and returns no
// pods then. Pod names must be unique; gpu_milli must be 0 without cards,
// 1..1000 with one and 1000 with several.
func ReadPods(r io.Reader, name string) ([]Pod, error) {
	t, err := newTable(r, name,
		[]string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"},
		[]string{"gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"})
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	return readRows(t, func() Pod {
		p := Pod{
			Name:      t.name("name", seen),
			MilliCPU:  t.num("cpu_milli", noLimit),
			MemoryMiB: t.num("memory_mib", noLimit),
			NumGPU:    int(t.num("num_gpu", maxGPUs)),
			GPUMilli:  t.num("gpu_milli", wholeCard),
		}
		t.checkGPUMilli(p.NumGPU, p.GPUMilli)
		p.GPUSpec = t.models("gpu_spec")
		p.QoS = t.text("qos")
		p.Phase = t.text("pod_phase")
		p.Creation = t.optNum("creation_time")
		p.Deletion = t.optNum("deletion_time")
		p.Scheduled = t.optNum("scheduled_time")
		return p
	})
}

// readRows parses every row of t with parse, which reads the row through
// t's field methods; it fails at the first bad row and returns no rows then.
func readRows[T any](t *table, parse func() T) ([]T, error) {
	var out []T
	for {
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		v := parse()
		if t.err != nil {
			return nil, t.err
		}
		out = append(out, v)
	}
}

// table reads a CSV file with a header row, one row at a time. Its field
// methods record the first error of the row in err and return zero values
// after it, so that a row is parsed in one pass and checked once.
type table struct {
	file  string
	r     *csv.Reader
	cols  map[string]int
	width int
	row   int
	rec   []string
	err   error
}

// newTable reads the header. It must hold every column of required, and
// either all columns of optional or none, and nothing else.
func newTable(r io.Reader, file string, required, optional []string) (*table, error) {
	want := strings.Join(required, ",")
	if len(optional) > 0 {
		want += " or " + strings.Join(slices.Concat(required, optional), ",")
	}
	cr := csv.NewReader(r)
	// The header decides the width; next checks it with a clearer error
	// than csv.ErrFieldCount.
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: file is empty, want a header row %s", file, want)
	}
	if pe := (*csv.ParseError)(nil); errors.As(err, &pe) {
		return nil, fmt.Errorf("%s: header: %w", file, pe.Err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", file, err)
	}
	header[0] = strings.TrimPrefix(header[0], "\uFEFF")
	cols := map[string]int{}
	var unknown []string
	for i, h := range header {
		h = strings.TrimSpace(h)
		if !slices.Contains(required, h) && !slices.Contains(optional, h) {
			unknown = append(unknown, strconv.Quote(h))
			continue
		}
		if _, dup := cols[h]; dup {
			return nil, fmt.Errorf("%s: header: column %s appears twice", file, h)
		}
		cols[h] = i
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%s: header: unknown column %s, want %s", file, strings.Join(unknown, ", "), want)
	}
	missing := absent(cols, required)
	if m := absent(cols, optional); len(m) < len(optional) {
		missing = append(missing, m...)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: header: missing column %s, want %s", file, strings.Join(missing, ", "), want)
	}
	return &table{file: file, r: cr, cols: cols, width: len(header)}, nil
}

// absent returns the columns of names that cols lacks.
func absent(cols map[string]int, names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := cols[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

// next reads the next row; it returns false at the end of the file.
func (t *table) next() (bool, error) {
	rec, err := t.r.Read()
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	t.row++
	t.err = nil
	if pe := (*csv.ParseError)(nil); errors.As(err, &pe) {
		return false, fmt.Errorf("%s: row %d (line %d): %w", t.file, t.row, pe.Line, pe.Err)
	}
	if err != nil {
		return false, fmt.Errorf("%s: row %d: %w", t.file, t.row, err)
	}
	if len(rec) != t.width {
		return false, fmt.Errorf("%s: row %d: %d columns, want %d as in the header", t.file, t.row, len(rec), t.width)
	}
	t.rec = rec
	return true, nil
}

// fail records an error about column col of the current row, unless the
// row already has one.
func (t *table) fail(col, format string, args ...any) {
	if t.err == nil {
		t.err = fmt.Errorf("%s: row %d: column %s: %s", t.file, t.row, col, fmt.Sprintf(format, args...))
	}
}

// text returns column col of the current row, "" when the file lacks it.
func (t *table) text(col string) string {
	i, ok := t.cols[col]
	if !ok {
		return ""
	}
	return strings.TrimSpace(t.rec[i])
}

// name returns column col, which must be non-empty and unique; seen maps the
// names read so far to their rows.
func (t *table) name(col string, seen map[string]int) string {
	s := t.text(col)
	if s == "" {
		t.fail(col, "is empty")
		return ""
	}
	if first, dup := seen[s]; dup {
		t.fail(col, "%q is also the name in row %d", s, first)
		return ""
	}
	seen[s] = t.row
	return s
}

// num returns column col as a whole number in 0..limit.
func (t *table) num(col string, limit int64) int64 {
	if t.err != nil {
		return 0
	}
	s := t.text(col)
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		t.fail(col, "%q is out of range", s)
	case err != nil:
		t.fail(col, "%q is not a whole number", s)
	case v < 0:
		t.fail(col, "%d is negative", v)
	case v > limit:
		t.fail(col, "%d is more than %d", v, limit)
	default:
		return v
	}
	return 0
}

// optNum is num without a limit, and 0 when the column is empty or absent.
func (t *table) optNum(col string) int64 {
	if t.text(col) == "" {
		return 0
	}
	return t.num(col, noLimit)
}

// checkGPUMilli checks gpu_milli against num_gpu, the trace's convention.
func (t *table) checkGPUMilli(numGPU int, milli int64) {
	switch {
	case t.err != nil:
	case numGPU == 0 && milli != 0:
		t.fail("gpu_milli", "%d with num_gpu 0, want 0", milli)
	case numGPU == 1 && milli == 0:
		t.fail("gpu_milli", "0 with num_gpu 1, want 1..%d", wholeCard)
	case numGPU > 1 && milli != wholeCard:
		t.fail("gpu_milli", "%d with num_gpu %d, want %d: a multi-GPU pod takes whole cards", milli, numGPU, wholeCard)
	}
}

// models splits column col at "|"; it returns nil when the column is empty.
func (t *table) models(col string) []string {
	s := t.text(col)
	if s == "" || t.err != nil {
		return nil
	}
	ms := strings.Split(s, "|")
	for i, m := range ms {
		if ms[i] = strings.TrimSpace(m); ms[i] == "" {
			t.fail(col, "%q has an empty model name, want names separated by |", s)
			return nil
		}
	}
	return ms
}

// ReadFiles reads a node list and a pod list from their files.
func ReadFiles(nodesPath, podsPath string) ([]Node, []Pod, error) {
	f, err := os.Open(nodesPath)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	nodes, err := ReadNodes(f, nodesPath)
	if err != nil {
		return nil, nil, err
	}
	g, err := os.Open(podsPath)
	if err != nil {
		return nil, nil, err
	}
	defer g.Close()
	pods, err := ReadPods(g, podsPath)
	if err != nil {
		return nil, nil, err
	}
	return nodes, pods, nil
}
