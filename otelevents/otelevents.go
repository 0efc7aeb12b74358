// Package otelevents counts oauthflow events as OpenTelemetry metrics. It is
// a module of its own, so an app that does not use OpenTelemetry does not
// require it:
//
//	hook, err := otelevents.Hook(otel.Meter("oauthflow"))
//	m, err := oauthflow.New(ctx, oauthflow.Config{OnEvent: oauthflow.AllEvents(hook, oauthflow.LogEvents(audit))})
package otelevents

import (
	"context"

	"github.com/oauthflow/oauthflow"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metric is the counter's name.
const Metric = "oauthflow.events"

// Hook returns an event hook that adds one to the counter oauthflow.events
// for each event, with the attributes kind (tokens_refreshed, flow_failed,
// ...), provider, failed (the event carries an error) and grant_dead. The
// user ID is left out: its cardinality has no bound.
func Hook(meter metric.Meter) (oauthflow.EventHook, error) {
	c, err := meter.Int64Counter(Metric, metric.WithUnit("{event}"),
		metric.WithDescription("oauthflow events: tokens stored, refreshed and deleted, refreshes failed, sign-ins completed and failed, ..."))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, e oauthflow.Event) {
		c.Add(ctx, 1, metric.WithAttributes(
			attribute.String("kind", string(e.Kind)),
			attribute.String("provider", e.ProviderID),
			attribute.Bool("failed", e.Err != nil),
			attribute.Bool("grant_dead", e.GrantDead)))
	}, nil
}
