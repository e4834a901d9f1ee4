package throttle

import (
	"net/http"
	"time"

	"github.com/throttlekit/throttle/headers"
	"github.com/throttlekit/throttle/internal/hdrhook"
)

// parseInto is headers.Parse appending the quotas to dst[:0] and returning
// them in Info.Quotas, so that a dst with room for them all spares Parse's
// allocation (see internal/hdrhook; keep dst on the heap, in memory the
// caller has anyway: the indirect call makes a stack dst escape).
var parseInto = hdrhook.ParseInto.(func(dst []headers.Quota, h http.Header, now time.Time) headers.Info)
