package scriptedmodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// listedFeature is one feature as the initializer writes it, in the v1
// contract format (SPEC section 2) and in its key order.
type listedFeature struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Steps       []string `json:"steps"`
	DependsOn   []string `json:"depends_on"`
	Scope       []string `json:"scope"`
	Test        string   `json:"test"`
	Status      string   `json:"status"`
	Tested      bool     `json:"tested"`
	Evidence    []string `json:"evidence"`
}

// initialFeatureList is the feature list the initializer writes.
func initialFeatureList(sc Scenario) (string, error) {
	list := struct {
		Version  int             `json:"version"`
		Features []listedFeature `json:"features"`
	}{Version: 1}
	for _, f := range sc.Features {
		list.Features = append(list.Features, listedFeature{
			ID:          f.ID,
			Title:       f.Title,
			Description: fmt.Sprintf("%s: %s holds the line %q.", f.Title, sourcePath(f.ID), workingLine(f.ID)),
			Steps: []string{
				fmt.Sprintf("Write the line %q to %s", workingLine(f.ID), sourcePath(f.ID)),
				"Run " + testCommand(f.ID),
			},
			// Empty lists rather than null: readers of the contract may
			// expect arrays.
			DependsOn: append([]string{}, f.DependsOn...),
			// The feature's source file, and the build log an agent may
			// keep (the reads-huge-log behavior writes it with Bash).
			Scope:    []string{sourcePath(f.ID), hugeLogPath(f.ID)},
			Test:     testCommand(f.ID),
			Status:   "pending",
			Evidence: []string{},
		})
	}
	return encodeJSON(list)
}

// editFeature applies change to the feature id of a feature list and
// returns the new list. Everything else, including fields and features this
// package does not know, is kept as it was read; only key order is lost.
func editFeature(list, id string, change func(map[string]any)) (string, error) {
	return editList(list, func(features []map[string]any) error {
		for _, f := range features {
			if f["id"] == id {
				change(f)
				return nil
			}
		}
		return fmt.Errorf("no feature %q", id)
	})
}

// editList applies change to the features of a feature list (each an
// object; entries that are not are left out of what change sees and kept as
// they are) and returns the new list, keeping what it does not change as
// editFeature does.
func editList(list string, change func([]map[string]any) error) (string, error) {
	var doc map[string]any
	dec := json.NewDecoder(strings.NewReader(list))
	// Numbers stay as written, not rounded through float64.
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return "", fmt.Errorf("invalid JSON: %w", err)
	}
	features, ok := doc["features"].([]any)
	if !ok {
		return "", errors.New(`no "features" array`)
	}
	var objects []map[string]any
	for _, f := range features {
		if m, ok := f.(map[string]any); ok {
			objects = append(objects, m)
		}
	}
	if err := change(objects); err != nil {
		return "", err
	}
	return encodeJSON(doc)
}

// encodeJSON writes JSON the way people write it: two-space indent, a final
// newline, and "<" left as it is.
func encodeJSON(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return b.String(), nil
}
