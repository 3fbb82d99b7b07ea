package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(issue): replaced by the real command.
func newReconcileCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "reconcile",
		Short: "not built yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("reconcile is not built yet")
		},
	}
}
