package throttle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlekit/throttle/internal/testutil/apisim"
)

// TestModelsApart: OpenAI limits each model apart and its answers do not
// name the model; one Transport per model (docs/recipes.md) keeps their
// quotas apart: gpt-4o's 30,000 tokens a minute are not spent on the word
// of gpt-4o-mini's 200,000. (Through one Transport the same run drew 9
// refusals of gpt-4o.)
func TestModelsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sims := map[string]*apisim.OpenAI{
			"gpt-4o-mini": apisim.NewOpenAI(apisim.OpenAIConfig{RequestsPerWindow: 500, TokensPerWindow: 200000, Model: "gpt-4o-mini"}),
			"gpt-4o":      apisim.NewOpenAI(apisim.OpenAIConfig{RequestsPerWindow: 500, TokensPerWindow: 30000, Model: "gpt-4o"}),
		}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			var v struct{ Model string }
			require.NoError(t, json.Unmarshal(body, &v))
			r.Body = io.NopCloser(bytes.NewReader(body))
			sims[v.Model].ServeHTTP(w, r)
		})
		base := &apisim.Transport{Handler: h, Latency: 50 * time.Millisecond}
		start := time.Now()
		var wg sync.WaitGroup
		for model := range sims {
			tr := NewTransport(base)
			defer tr.Close()
			client := &http.Client{Transport: tr}
			jobs := make(chan int, 60)
			for i := range 60 {
				jobs <- i
			}
			close(jobs)
			body := fmt.Sprintf(`{"model": %q, "max_tokens": 1000, "messages": [{"role": "user", "content": "hi"}]}`, model)
			for range 5 {
				wg.Go(func() {
					for range jobs {
						untilOK(t, client, func() *http.Request {
							ctx := WithCost(context.Background(), "tokens", 1010)
							req, err := http.NewRequestWithContext(ctx, "POST", "http://api.openai.test/v1/chat/completions", strings.NewReader(body))
							require.NoError(t, err)
							return req
						})
					}
				})
			}
		}
		wg.Wait()
		for model, s := range sims {
			st := s.Snapshot()
			t.Logf("%s: %d admitted, %d refused", model, st.Admitted, st.Refused)
			assert.EqualValues(t, 60, st.Admitted, model)
			assert.Zero(t, st.Refused, model)
		}
		// gpt-4o: 30 at once, then 30 more as its minute refills.
		assert.Less(t, time.Since(start), 62*time.Second)
	})
}
