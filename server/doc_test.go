package server_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/server"
)

// TestDocErrorExample: the error the package documentation shows for a
// bad policy file is the one LoadPolicy returns for it.
func TestDocErrorExample(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	m := regexp.MustCompile(`// e\.g\. (server: policy .*)`).FindSubmatch(doc)
	require.NotNil(t, m, "doc.go shows no policy error")
	t.Chdir(t.TempDir())
	require.NoError(t, os.WriteFile("policy.yaml", []byte(`default_plan: free
plans:
  free:
    default:
      limits:
        - {algorithm: fixed_window, limit: 10, window: 1h}
  pro:
    endpoints:
      "POST /api/ask":
        limits:
          - {algorithm: gcra, limit: 5, rate: 10/s}
          - {algorithm: gcra, limit: 5, rate: 10/x}
`), 0o600))
	_, err = server.LoadPolicy("policy.yaml")
	require.Error(t, err)
	assert.Equal(t, string(m[1]), err.Error())
}
