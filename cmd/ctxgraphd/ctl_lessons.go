package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ctxgraphd/ctxgraphd/control"
	"github.com/ctxgraphd/ctxgraphd/internal/textcut"
)

func ctlLessonsCmd(f *ctlFlags) *cobra.Command {
	lessons := &cobra.Command{
		Use:   "lessons",
		Short: "The project's lessons: listed, added, or promoted into CLAUDE.md",
		Long: `lessons lists the project's lessons. Every later agent is told them in its
command's precedent. "lessons add TEXT" records one. "lessons promote ID" writes
a lesson, or the note of a correction (ctl unblock --note), into a marked
ctxgraphd section of the project's CLAUDE.md, once, keeping everything else
in the file; Claude Code reads CLAUDE.md in every session.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) ([]control.Trace, error) {
				ts, err := c.Traces(ctx, control.TraceQuery{Type: control.TraceLesson, Level: control.LevelFull})
				if ts == nil {
					ts = []control.Trace{}
				}
				return ts, err
			}, printLessons)
		},
	}
	add := &cobra.Command{
		Use:   "add TEXT",
		Short: "Record a lesson of the project, for every later agent",
		Args:  usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.Trace, error) {
				return c.AddLesson(ctx, strings.Join(args, " "))
			}, func(w io.Writer, t control.Trace) error {
				_, err := fmt.Fprintf(w, "%s: lesson recorded; `ctxgraphd ctl lessons promote %s` writes it into CLAUDE.md\n", t.ID, t.ID)
				return err
			})
		},
	}
	promote := &cobra.Command{
		Use:   "promote ID",
		Short: "Write a lesson, or a correction's note, into the project's CLAUDE.md",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ctlRun(cmd, f, func(c *control.Client, ctx context.Context) (control.Trace, error) {
				return c.PromoteLesson(ctx, args[0])
			}, func(w io.Writer, t control.Trace) error {
				_, err := fmt.Fprintf(w, "%s: in CLAUDE.md: %s\n", t.ID, textcut.Fold(t.Event.WhatHappened))
				return err
			})
		},
	}
	lessons.AddCommand(add, promote)
	return lessons
}

func printLessons(w io.Writer, ts []control.Trace) error {
	if len(ts) == 0 {
		_, err := fmt.Fprintln(w, "no lessons yet; `ctxgraphd ctl lessons add TEXT` records one")
		return err
	}
	for _, t := range ts {
		if _, err := fmt.Fprintf(w, "%s  %s\n", t.ID, textcut.Fold(t.Event.WhatHappened)); err != nil {
			return err
		}
	}
	return nil
}
