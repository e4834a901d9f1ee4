package headers

import "github.com/throttlekit/throttle/internal/hdrhook"

// init hands parseInto to the Transport through internal/hdrhook: it is
// the one way to set a variable of another package before its importers'
// variables read it, and we add no public API for it.
func init() {
	hdrhook.ParseInto = parseInto
}
