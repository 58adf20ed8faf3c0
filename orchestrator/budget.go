package orchestrator

// The budgets a person is warned about before they run out.

import (
	"fmt"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/notify"
	"github.com/ctxgraphd/ctxgraphd/statemachine"
	"go.uber.org/zap"
)

// budgetWarnAt is the share of a budget spent at which a person is warned,
// before anything is stopped for it.
const budgetWarnAt = 0.8

// nearlySpent reports whether spent is past the warning share of budget
// (0: no budget).
func nearlySpent(spent, budget float64) bool {
	return budget > 0 && spent >= budgetWarnAt*budget
}

// warnBudgets warns a person, once each, when the session's or feature's
// budget is nearly spent: a trace, the log, a notification.
func (o *Orchestrator) warnBudgets(feature string) {
	warn := func(id, what string, spent, budget float64, key string) {
		msg := fmt.Sprintf("%s has spent $%.2f of its %s of $%.2f (%.0f%%); at the limit it is stopped", what, spent, key, budget, 100*spent/budget)
		o.trace(control.Trace{Type: control.TraceDecision, Source: control.SourceAuto, Code: "budget_warning", Context: control.TraceContext{Feature: id},
			Event: control.TraceEvent{WhatHappened: msg, Why: "a person may want to raise the budget, or look, before the limit stops the work"}})
		o.opts.Log.Warn("budget nearly spent", zap.String("feature", id), zap.Float64("spent_usd", spent), zap.Float64("budget_usd", budget), zap.String("key", key))
		o.notify(notify.BudgetWarning, id, msg)
	}
	if !o.session.BudgetWarned && nearlySpent(o.tally.totalCost, o.opts.Config.Budget.SessionUSD) {
		o.session.BudgetWarned = true
		warn("", "the session", o.tally.totalCost, o.opts.Config.Budget.SessionUSD, statemachine.SessionBudgetKey)
	}
	if c := o.counters[feature]; feature != "" && !c.BudgetWarned && nearlySpent(c.CostUSD, o.opts.Config.Budget.FeatureUSD) {
		c.BudgetWarned = true
		o.setCounters(feature, c)
		warn(feature, feature, c.CostUSD, o.opts.Config.Budget.FeatureUSD, statemachine.FeatureBudgetKey)
	}
}
