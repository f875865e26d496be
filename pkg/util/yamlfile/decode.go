package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Decode decodes data, the one YAML document of the file name, into out,
// strictly: an unknown field is an error. what says what the file should
// hold, for the error on an empty file. It returns the document's node
// tree, for FieldError. Every error starts with "name:line:" where the
// line is known, and names the field. out's fields are named by yaml
// tags; DecodeObject reads types named by json tags.
func Decode(name string, data []byte, what string, out any) (*yaml.Node, error) {
	root, err := Parse(name, data, what)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return nil, typeError(name, root, te)
		}
		return nil, syntaxError(name, err)
	}
	return root, nil
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
	lines := make([]string, len(all))
	for i, e := range all {
		lines[i] = at(name, e.line, e.msg)
	}
	return joinErrors(lines)
}

// maxErrors bounds the errors of one file that are listed; the rest are
// counted.
const maxErrors = 20

// joinErrors makes one error of lines, one per line, the first maxErrors
// of them.
func joinErrors(lines []string) error {
	if len(lines) > maxErrors {
		lines = append(lines[:maxErrors:maxErrors], fmt.Sprintf("and %d more", len(lines)-maxErrors))
	}
	return errors.New(strings.Join(lines, "\n"))
}

// at prefixes msg with the file and, when known, the line.
func at(name string, line int, msg string) string {
	if line == 0 {
		return fmt.Sprintf("%s: %s", name, msg)
	}
	return fmt.Sprintf("%s:%d: %s", name, line, msg)
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

// FieldError reports every validation error, one per line, each at the
// line of its field.
func FieldError(name string, root *yaml.Node, errs field.ErrorList) error {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = at(name, lineOfPath(root, e.Field), e.Error())
	}
	return joinErrors(lines)
}
