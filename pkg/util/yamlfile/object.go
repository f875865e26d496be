package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// Parse returns the node tree of data, the one YAML document of the file
// name, for Errors: a syntax error, an empty file (what says what it
// should hold) or a second document is reported at its line.
func Parse(name string, data []byte, what string) (*yaml.Node, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	switch err := dec.Decode(&root); {
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("%s: file is empty: want %s", name, what)
	case err != nil:
		return nil, syntaxError(name, err)
	case len(root.Content) == 0:
		return nil, fmt.Errorf("%s: file is empty: want %s", name, what)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, fmt.Errorf("%s:%d: want one YAML document, found more", name, extra.Line)
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(name, err)
	}
	return &root, nil
}

// DecodeObject decodes data, the one YAML document of the file name, into
// out, a type of Kubernetes' API conventions (json tags), as Kubernetes
// reads its objects (sigs.k8s.io/yaml, case-sensitive), and strictly: an
// unknown field is an error. It returns the document's node tree, for
// Errors and FieldError. Every error starts with "name:line:" where the
// line is known, and names the field.
func DecodeObject(name string, data []byte, what string, out any) (*yaml.Node, error) {
	root, err := Parse(name, data, what)
	if err != nil {
		return nil, err
	}
	js, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return nil, syntaxError(name, err)
	}
	strict, err := sigsjson.UnmarshalStrict(js, out)
	if err != nil {
		return nil, Errors(name, root, err)
	}
	if len(strict) > 0 {
		return nil, Errors(name, root, strict...)
	}
	return root, nil
}

// typeMismatch is encoding/json's error for a value of the wrong type, as
// sigs.k8s.io/json words it: the field's full path is in it.
var typeMismatch = regexp.MustCompile(`^json: cannot unmarshal (.+) into Go struct field [^.]+\.(\S+) of type (\S+)$`)

// fieldPather is an error that knows the path of its field
// (sigs.k8s.io/json's strict errors).
type fieldPather interface{ FieldPath() string }

// Errors reports errs, the errors of decoding or validating the file's
// content, one per line, each at the line of the field it names:
// field.Errors (validation), strict decoding errors (an unknown field),
// aggregates of either, and type mismatches. Others are reported at the
// file without a line.
func Errors(name string, root *yaml.Node, errs ...error) error {
	return errorsAt(name, root, 0, errs...)
}

// errorsAt is Errors, with the errors it cannot place at line.
func errorsAt(name string, root *yaml.Node, line int, errs ...error) error {
	var lines []string
	var walk func(error)
	walk = func(err error) {
		var fe *field.Error
		var fp fieldPather
		if err == nil {
			return
		}
		if strict, ok := runtime.AsStrictDecodingError(err); ok {
			for _, e := range strict.Errors() {
				walk(e)
			}
			return
		}
		if all := asAggregate(err); all != nil {
			for _, e := range all {
				walk(e)
			}
			return
		}
		switch m := typeMismatch.FindStringSubmatch(err.Error()); {
		case errors.As(err, &fe):
			lines = append(lines, at(name, lineOfPath(root, fe.Field), fe.Error()))
		case errors.As(err, &fp):
			lines = append(lines, at(name, lineOfPath(root, fp.FieldPath()), err.Error()))
		case m != nil:
			lines = append(lines, at(name, lineOfPath(root, m[2]), fmt.Sprintf("%s: invalid value: want %s, found %s", m[2], goTypeWord(m[3]), m[1])))
		default:
			lines = append(lines, at(name, line, err.Error()))
		}
	}
	for _, err := range errs {
		walk(err)
	}
	if len(lines) == 0 {
		return nil
	}
	return joinErrors(lines)
}

// asAggregate returns the errors of an aggregate (utilerrors.Aggregate,
// errors.Join), nil for any other error.
func asAggregate(err error) []error {
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		return joined.Unwrap()
	}
	var aggregate interface{ Errors() []error }
	if errors.As(err, &aggregate) {
		return aggregate.Errors()
	}
	return nil
}
