package metrics

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/push"

	"github.com/coldtrace/coldtrace/attribution"
	"github.com/coldtrace/coldtrace/record"
)

// PushTimeout bounds one push: an unreachable Pushgateway must not hold
// the run's other outputs for long.
const PushTimeout = 10 * time.Second

// Push sends the run's metrics to the Pushgateway at url, in the group
// of Group(r). It uses PUT, which replaces every metric of that group: the
// previous run of the same instance disappears rather than lingering
// beside it. The job and instance labels are the group's, so the metrics
// themselves leave them out.
func Push(ctx context.Context, url string, r *record.Record, res *attribution.Result) error {
	reg, err := Registry(r, res, JobLabel, InstanceLabel)
	if err != nil {
		return err
	}
	job, instance := Group(r)
	ctx, cancel := context.WithTimeout(ctx, PushTimeout)
	defer cancel()
	err = push.New(url, job).
		Grouping(InstanceLabel, instance).
		Gatherer(reg).
		Client(&http.Client{Timeout: PushTimeout, CheckRedirect: refuseRedirect}).
		PushContext(ctx)
	if err != nil {
		return fmt.Errorf("push metrics to %s (job %q, instance %q): %w", url, job, instance, err)
	}
	return nil
}

// refuseRedirect keeps a push at the URL it was given: a Pushgateway
// answers a PUT itself, and following a redirect would let the server
// send coldtrace (root, under sudo) to a URL that /etc/coldtrace/config
// does not allow.
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("the Pushgateway redirected the push to %s; not followed", req.URL.Redacted())
}
