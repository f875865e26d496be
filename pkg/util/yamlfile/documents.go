package yamlfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// Document is one document of a YAML stream.
type Document struct {
	// Root is the document's node tree, with the lines of the whole file.
	Root *yaml.Node
	// Data is the document alone, for a decoder of Kubernetes' objects.
	Data []byte
	// Line is the line the document starts at.
	Line int
}

// Documents splits data, the YAML stream of the file name (documents
// separated by "---", or JSON), into its documents, leaving out empty
// ones. A syntax error is reported at its line.
func Documents(name string, data []byte) ([]Document, error) {
	var out []Document
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var root yaml.Node
		err := dec.Decode(&root)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, syntaxError(name, err)
		}
		if len(root.Content) == 0 || root.Content[0].Tag == "!!null" {
			continue
		}
		doc, err := yaml.Marshal(&root)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, root.Content[0].Line, err)
		}
		out = append(out, Document{Root: &root, Data: doc, Line: root.Content[0].Line})
	}
}

// Errors is the package's Errors for the document of the file name:
// errors it cannot place at a field are at the document's first line.
func (d Document) Errors(name string, errs ...error) error {
	return errorsAt(name, d.Root, d.Line, errs...)
}

// At prefixes msg with the file and the document's first line.
func (d Document) At(name string, err error) error {
	return fmt.Errorf("%s:%d: %w", name, d.Line, err)
}
