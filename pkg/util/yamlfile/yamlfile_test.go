package yamlfile

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsyaml "sigs.k8s.io/yaml"
)

// object is a type of Kubernetes' conventions: fields named by json tags.
type object struct {
	Kind  string `json:"kind"`
	Spec  spec   `json:"spec"`
	Items []item `json:"items,omitempty"`
}

type spec struct {
	Count   int  `json:"count"`
	Enabled bool `json:"enabled"`
}

type item struct {
	Name string `json:"name"`
}

func TestDecodeObject(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       object
		wantErr    string
	}{
		{name: "good", data: "kind: K\nspec:\n  count: 3\n  enabled: true\nitems: [{name: a}]\n",
			want: object{Kind: "K", Spec: spec{Count: 3, Enabled: true}, Items: []item{{Name: "a"}}}},
		{name: "unknown field at its line", data: "kind: K\nspec:\n  count: 3\n  cuont: 4\n", wantErr: `f.yaml:4: unknown field "spec.cuont"`},
		{name: "unknown field in a list item", data: "kind: K\nitems:\n- name: a\n- title: b\n", wantErr: `f.yaml:4: unknown field "items[1].title"`},
		{name: "wrong type", data: "kind: K\nspec:\n  count: many\n", wantErr: "f.yaml:3: spec.count: invalid value: want an integer, found string"},
		{name: "case matters", data: "Kind: K\n", wantErr: `f.yaml:1: unknown field "Kind"`},
		{name: "syntax", data: "kind: K\nspec: {count: 1\n", wantErr: "f.yaml:1: invalid YAML: did not find expected"},
		{name: "empty", data: "\n# nothing\n", wantErr: "f.yaml: file is empty: want an object"},
		{name: "two documents", data: "kind: K\n---\nkind: L\n", wantErr: "f.yaml:2: want one YAML document, found more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got object
			_, err := DecodeObject("f.yaml", []byte(tc.data), "an object", &got)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Errorf("error = %v, want one starting with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind != tc.want.Kind || got.Spec != tc.want.Spec || len(got.Items) != len(tc.want.Items) {
				t.Errorf("decoded %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Errors places each error at the line of its field, flattening
// aggregates, and keeps an error without a field at the file.
func TestErrors(t *testing.T) {
	root, err := Parse("f.yaml", []byte("kind: K\nspec:\n  count: 3\nitems:\n- name: a\n- name: b\n"), "an object")
	if err != nil {
		t.Fatal(err)
	}
	errs := field.ErrorList{
		field.Invalid(field.NewPath("spec", "count"), 3, "too many"),
		field.Required(field.NewPath("items").Index(1).Child("size"), ""),
	}
	got := Errors("f.yaml", root, errors.Join(errs.ToAggregate(), errors.New("no field")))
	want := "f.yaml:3: spec.count: Invalid value: 3: too many\n" +
		"f.yaml:6: items[1].size: Required value\n" +
		"f.yaml: no field"
	if got == nil || got.Error() != want {
		t.Errorf("Errors =\n%v\nwant\n%s", got, want)
	}
	if Errors("f.yaml", root) != nil {
		t.Error("Errors of no error is not nil")
	}
}

func TestDocuments(t *testing.T) {
	data := "---\na: 1\n---\n# nothing\n---\nb:\n  c: [1, 2]\n---\n{\"d\": true}\n"
	docs, err := Documents("f.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, d := range docs {
		lines = append(lines, d.Line)
	}
	if want := []int{2, 6, 9}; !slices.Equal(lines, want) {
		t.Fatalf("documents at lines %v, want %v (the empty one left out)", lines, want)
	}
	var b struct {
		B struct{ C []int } `json:"b"`
	}
	if err := json.Unmarshal(mustJSON(t, docs[1].Data), &b); err != nil || !slices.Equal(b.B.C, []int{1, 2}) {
		t.Errorf("second document's data decodes to %+v (%v), want c [1 2]", b, err)
	}
	if got := docs[1].Errors("f.yaml", errors.New("boom")).Error(); got != "f.yaml:6: boom" {
		t.Errorf("an error without a field: %q, want it at the document's line", got)
	}
	if _, err := Documents("f.yaml", []byte("a: 1\n---\nb: [\n")); err == nil || !strings.HasPrefix(err.Error(), "f.yaml:") {
		t.Errorf("syntax error %v, want one at f.yaml's line", err)
	}
}

func mustJSON(t *testing.T, data []byte) []byte {
	t.Helper()
	js, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
