package oauthtemporal

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/reflect/protoreflect"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json with the histories of the end-to-end test")

// history reads workflow id's whole history.
func history(t *testing.T, id string) *historypb.History {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	it := temporalClient.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		h.Events = append(h.Events, ev)
	}
	return h
}

var payloadName = (&commonpb.Payload{}).ProtoReflect().Descriptor().FullName()

// payloadsContaining walks every field of every event and returns where a
// payload (its data or its metadata) holds needle, as
// "eventID:eventType:field path", and how many payloads it read.
func payloadsContaining(h *historypb.History, needle []byte) (hits []string, scanned int) {
	var walk func(m protoreflect.Message, path string, ev *historypb.HistoryEvent)
	walk = func(m protoreflect.Message, path string, ev *historypb.HistoryEvent) {
		if m.Descriptor().FullName() == payloadName {
			scanned++
			p := m.Interface().(*commonpb.Payload)
			found := bytes.Contains(p.GetData(), needle)
			for _, v := range p.GetMetadata() {
				found = found || bytes.Contains(v, needle)
			}
			if found {
				hits = append(hits, fmt.Sprintf("%d:%s:%s", ev.GetEventId(), ev.GetEventType(), path))
			}
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			p := path + "." + string(fd.Name())
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := range v.List().Len() {
					walk(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", p, i), ev)
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message(), fmt.Sprintf("%s[%v]", p, k), ev)
					return true
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				walk(v.Message(), p, ev)
			}
			return true
		})
	}
	for _, ev := range h.Events {
		walk(ev.ProtoReflect(), "", ev)
	}
	return hits, scanned
}

// assertNoSecret fails t when any payload of h holds one of secrets.
func assertNoSecret(t *testing.T, h *historypb.History, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if s == "" {
			t.Fatal("an empty secret: the test lost one")
		}
		if hits, scanned := payloadsContaining(h, []byte(s)); len(hits) > 0 || scanned == 0 {
			t.Errorf("a secret (%d bytes) is in the history, at %v (%d payloads read)", len(s), hits, scanned)
		}
	}
}

// TestScannerFindsAPlantedSecret: the scanner that proves the histories clean
// finds a value planted in a payload nested deep in an event.
func TestScannerFindsAPlantedSecret(t *testing.T) {
	t.Parallel()
	planted := "planted-" + time.Now().Format(time.RFC3339Nano)
	ev := &historypb.HistoryEvent{EventId: 7, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionUpdateAcceptedEventAttributes{
			WorkflowExecutionUpdateAcceptedEventAttributes: &historypb.WorkflowExecutionUpdateAcceptedEventAttributes{
				AcceptedRequest: nil}}}
	h := &historypb.History{Events: []*historypb.HistoryEvent{ev, {EventId: 8,
		Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
			ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				Input: &commonpb.Payloads{Payloads: []*commonpb.Payload{
					{Data: []byte(`"other"`)},
					{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`{"handle":"` + planted + `"}`)}}}}}}}}
	hits, scanned := payloadsContaining(h, []byte(planted))
	if len(hits) != 1 || scanned != 2 || !strings.HasPrefix(hits[0], "8:") {
		t.Fatalf("hits %v in %d payloads, want one in event 8 of 2", hits, scanned)
	}
}

// saveHistory writes h to testdata/name under -update.
func saveHistory(t *testing.T, name string, h *historypb.History) {
	t.Helper()
	if !*update {
		return
	}
	js, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name), append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRecordedHistoriesReplay replays the histories the end-to-end test and
// the device sign-in's test recorded (testdata, rewritten with -update) on
// the code as it is: a change that would break workflows already running
// fails here.
func TestRecordedHistoriesReplay(t *testing.T) {
	t.Parallel()
	rp := worker.NewWorkflowReplayer()
	rp.RegisterWorkflowWithOptions(SignIn, workflow.RegisterOptions{Name: SignInWorkflowName})
	rp.RegisterWorkflowWithOptions(agentWorkflow, workflow.RegisterOptions{Name: "test.Agent"})
	rp.RegisterWorkflowWithOptions(DeviceSignIn, workflow.RegisterOptions{Name: DeviceSignInWorkflowName})
	for name, id := range map[string]string{"agent.json": e2eAgentID, "signin.json": e2eSignInID, "device.json": "device"} {
		f, err := os.Open(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id}}
		if err := rp.ReplayWorkflowHistoryWithOptions(quietLogger(), h, opts); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
