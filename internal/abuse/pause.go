package abuse

import (
	"context"
	"io"
)

func runPause(ctx context.Context, w io.Writer, e *environment) ([]string, error)   { return nil, nil }
func runHostile(ctx context.Context, w io.Writer, e *environment) ([]string, error) { return nil, nil }
