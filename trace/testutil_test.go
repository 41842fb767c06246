package trace

import (
	"testing"

	"github.com/coldtrace/coldtrace/internal/testenv"
)

func requireTracing(t *testing.T) {
	t.Helper()
	testenv.RequireTracing(t)
}
