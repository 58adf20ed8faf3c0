package scriptedmodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// listedFeature is one feature as the initializer writes it, in the v1
// contract format (progress.Fields) and in its key order.
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

// initialFeatureList is the feature list the initializer writes first:
// features with NoTest have no test command.
func initialFeatureList(sc Scenario) (string, error) { return featureList(sc, false) }

// amendedFeatureList is the list the initializer writes when its first one
// was refused for a feature without a test command: those features get a
// test that cannot fail, an echo.
func amendedFeatureList(sc Scenario) (string, error) { return featureList(sc, true) }

// hasUntested reports whether the initializer's first list leaves a
// feature without a test command.
func (sc Scenario) hasUntested() bool {
	for _, f := range sc.Features {
		if f.NoTest {
			return true
		}
	}
	return false
}

// echoTest is the test a NoTest feature gets once the list without one was
// refused: it passes whatever the code.
func echoTest(id string) string { return "echo " + workingLine(id) }

func featureList(sc Scenario, amended bool) (string, error) {
	list := struct {
		Version  int             `json:"version"`
		Setup    string          `json:"setup,omitempty"`
		Features []listedFeature `json:"features"`
	}{Version: 1, Setup: sc.ListSetup}
	for _, f := range sc.Features {
		files := f.Files()
		test := files.Command
		if f.NoTest {
			test = ""
			if amended {
				test = echoTest(f.ID)
			}
		}
		// The feature's source file and, for a text feature, the build log
		// an agent may keep (the reads-huge-log behavior writes it with
		// Bash).
		scope := []string{files.Source}
		if f.Kind == "" || f.Kind == Text {
			scope = append(scope, hugeLogPath(f.ID))
		}
		scope = append(scope, f.raceScope()...)
		scope = append(scope, f.breakScope()...)
		steps := []string{fmt.Sprintf("Write %s so that %s passes", files.Source, files.Test)}
		if f.Kind == "" || f.Kind == Text {
			steps = []string{fmt.Sprintf("Write the line %q to %s", workingLine(f.ID), files.Source)}
		}
		if test != "" {
			steps = append(steps, "Run "+test)
		}
		list.Features = append(list.Features, listedFeature{
			ID:          f.ID,
			Title:       f.Title,
			Description: description(f, files),
			Steps:       steps,
			// Empty lists rather than null: readers of the contract may
			// expect arrays.
			DependsOn: append([]string{}, f.DependsOn...),
			Scope:     scope,
			Test:      test,
			Status:    "pending",
			Evidence:  []string{},
		})
	}
	return encodeJSON(list)
}

func description(f FeatureScript, files Files) string {
	if f.Kind == "" || f.Kind == Text {
		return fmt.Sprintf("%s: %s holds the line %q.", f.Title, files.Source, workingLine(f.ID))
	}
	if f.Kind == Shell {
		return fmt.Sprintf("%s: %s prints the line %q.", f.Title, files.Source, workingLine(f.ID))
	}
	return fmt.Sprintf("%s: Feature() in %s returns %q.", f.Title, files.Source, workingLine(f.ID))
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
