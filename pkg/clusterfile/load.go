package clusterfile

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

//go:embed default.yaml
var defaultCluster []byte

// DefaultName is the name under which errors in the built-in cluster are reported.
const DefaultName = "<built-in default cluster>"

// Default returns the built-in heterogeneous cluster used when no file is given.
func Default() *Cluster {
	c, err := Parse(DefaultName, defaultCluster)
	if err != nil {
		// The file is embedded and covered by a test; failing here is a build defect.
		panic(err)
	}
	return c
}

// DefaultYAML returns the text of the built-in cluster, a starting point for a file of one's own.
func DefaultYAML() []byte { return bytes.Clone(defaultCluster) }

// Load reads, decodes, defaults and validates a cluster file.
func Load(path string) (*Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster file: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes, defaults and validates the cluster file content; name is
// used in error messages.
func Parse(name string, data []byte) (*Cluster, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, syntaxError(name, err)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: file is empty: want a Cluster with nodePools", name)
	}

	var c Cluster
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return nil, typeError(name, &root, te)
		}
		return nil, syntaxError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:%d: want one YAML document, found more", name, extra.Line)
	}

	c.setDefaults()
	if errs := c.Validate(); len(errs) > 0 {
		return nil, fieldError(name, &root, errs)
	}
	return &c, nil
}

func (c *Cluster) setDefaults() {
	for i := range c.NodePools {
		p := &c.NodePools[i]
		if p.MaxPods == 0 {
			p.MaxPods = DefaultMaxPods
		}
		if !p.EphemeralStorage.IsSet() {
			p.EphemeralStorage = Quantity{Quantity: DefaultEphemeralStorage.DeepCopy(), set: true}
		}
	}
}

var yamlLine = regexp.MustCompile(`(?s)^(?:yaml: )?line (\d+): (.*)$`)

// syntaxError turns a YAML syntax error into "file:line: message".
func syntaxError(name string, err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%s:%s: invalid YAML: %s", name, m[1], m[2])
	}
	return fmt.Errorf("%s: invalid YAML: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
}

var (
	unknownField = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	badScalar    = regexp.MustCompile("(?s)^cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")
	badKind      = regexp.MustCompile(`^cannot unmarshal !!(\w+) into (\S+)$`)
)

// typeError reports the first decoding error with the field it is about.
func typeError(name string, root *yaml.Node, te *yaml.TypeError) error {
	type located struct {
		line int
		msg  string
	}
	var all []located
	for _, e := range te.Errors {
		m := yamlLine.FindStringSubmatch(e)
		if m == nil {
			all = append(all, located{msg: e})
			continue
		}
		line, _ := strconv.Atoi(m[1])
		msg := m[2]
		if u := unknownField.FindStringSubmatch(msg); u != nil {
			msg = fmt.Sprintf("unknown field %q", u[1])
		} else if b := badScalar.FindStringSubmatch(msg); b != nil {
			msg = fmt.Sprintf("invalid value %q: want %s", b[2], goTypeWord(b[3]))
		} else if b := badKind.FindStringSubmatch(msg); b != nil {
			msg = fmt.Sprintf("want %s, found a YAML %s", goTypeWord(b[2]), b[1])
		}
		if path := pathAtLine(root, line); path != "" {
			msg = path + ": " + msg
		}
		all = append(all, located{line: line, msg: msg})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].line < all[j].line })
	first := all[0]
	more := ""
	if len(all) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(all)-1)
	}
	if first.line == 0 {
		return fmt.Errorf("%s: %s%s", name, first.msg, more)
	}
	return fmt.Errorf("%s:%d: %s%s", name, first.line, first.msg, more)
}

func goTypeWord(t string) string {
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "map"):
		return "a mapping"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	default:
		return "a mapping"
	}
}

// fieldError reports the first validation error at the line of its field.
func fieldError(name string, root *yaml.Node, errs field.ErrorList) error {
	first := errs[0]
	more := ""
	if len(errs) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	if line := lineOfPath(root, first.Field); line > 0 {
		return fmt.Errorf("%s:%d: %s%s", name, line, first.Error(), more)
	}
	return fmt.Errorf("%s: %s%s", name, first.Error(), more)
}
