package control

import (
	"context"
	"net/url"
	"time"
)

// Guard is a guard as the control API shows it (see guards.Rule, which this
// light package does not link): the rule, where it came from, and how often
// it acted.
type Guard struct {
	ID     string `json:"id"`
	Status string `json:"status"` // proposed, warn, enforce, retired
	Source string `json:"source"` // "pattern <kind>", "guards.yaml", …
	// Rule says the rule in a line.
	Rule       string     `json:"rule"`
	Event      string     `json:"event,omitempty"`
	Tool       string     `json:"tool,omitempty"`
	Role       string     `json:"role,omitempty"`
	Match      GuardMatch `json:"match"`
	Action     string     `json:"action,omitempty"`
	Message    string     `json:"message"`
	Suggestion string     `json:"suggestion,omitempty"`
	Created    time.Time  `json:"created,omitzero"`
	// Denials is how often it refused an action; WouldBe how often, in
	// warn, it would have (or, with action warn, warned).
	Denials int `json:"denials"`
	WouldBe int `json:"would_be"`
}

// GuardMatch is what a call must show for a guard to apply.
type GuardMatch struct {
	Command string `json:"command,omitempty"`
	Path    string `json:"path,omitempty"`
	Field   string `json:"field,omitempty"`
	Value   string `json:"value,omitempty"`
}

// GuardList answers GET /v1/guards: every guard, and what is wrong with
// the project's guards.yaml, if anything (the daemon then holds the rules
// it last read from it).
type GuardList struct {
	Guards []Guard `json:"guards"`
	// File is the guards file's path; Problem what is wrong with it.
	File    string `json:"file"`
	Problem string `json:"problem,omitempty"`
}

// Guards lists the project's guards (proposals refreshed first).
func (c *Client) Guards(ctx context.Context) (GuardList, error) {
	var l GuardList
	err := c.get(ctx, "/v1/guards", &l)
	return l, err
}

// PromoteGuard moves a guard one step: proposed → warn → enforce.
func (c *Client) PromoteGuard(ctx context.Context, id string) (Guard, error) {
	var g Guard
	err := c.post(ctx, "/v1/guards/"+url.PathEscape(id)+"/promote", nil, &g)
	return g, err
}

// RetireGuard ends a guard.
func (c *Client) RetireGuard(ctx context.Context, id string) (Guard, error) {
	var g Guard
	err := c.post(ctx, "/v1/guards/"+url.PathEscape(id)+"/retire", nil, &g)
	return g, err
}
