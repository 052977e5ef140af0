package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// WebhookChannel delivers each outbound message as a signed HTTP POST. The
// body is JSON; X-Baton-Signature is "t=<unix>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">" under Secret (SignatureHeader, VerifySignature), signed
// afresh on every attempt; X-Baton-Message-ID is the message's stable id,
// on which the receiver dedupes (delivery is at least once); and
// X-Baton-Sequence (SequenceHeader) is its delivery sequence on its thread
// (OutboundMessage.Sequence, also the body's "sequence"): a receiver that
// keeps the highest it has seen per thread and drops every message at or
// below it gets each message once and in order. Any answer but 2xx is a
// failure, a redirect included (it is never followed): the thread's
// delivery stops there and is retried with backoff, so later messages never
// overtake it.
type WebhookChannel struct {
	// URL receives the POSTs. Required.
	URL string
	// Secret signs the bodies. Empty (the default) sends no signature;
	// `baton serve` requires MinSecretBytes.
	Secret []byte
	// Client sends the requests. Nil (the default) means NewOutboundClient
	// with a 10 s timeout that connects to URL's host and port only and
	// follows no redirect. A client given here is used as is.
	Client *http.Client

	once   sync.Once
	client *http.Client
	err    error
}

var _ ChannelAdapter = (*WebhookChannel)(nil)

// Headers of a webhook POST besides the signature (SignatureHeader).
const (
	// MessageIDHeader carries the message's stable id.
	MessageIDHeader = "X-Baton-Message-ID"
	// SequenceHeader carries the message's delivery sequence on its thread.
	SequenceHeader = "X-Baton-Sequence"
)

// webhookBody is what a webhook receiver gets.
type webhookBody struct {
	MessageID   string    `json:"message_id"`
	Sequence    int64     `json:"sequence"`
	TenantID    string    `json:"tenant_id"`
	ThreadID    string    `json:"thread_id"`
	Channel     string    `json:"channel"`
	Contact     string    `json:"contact"`
	ExecutionID string    `json:"execution_id"`
	Text        string    `json:"text"`
	CreatedAt   time.Time `json:"created_at"`
}

// Deliver POSTs the message.
func (c *WebhookChannel) Deliver(ctx context.Context, msg OutboundMessage) error {
	id := strconv.FormatInt(msg.ID, 10)
	body, err := json.Marshal(webhookBody{
		MessageID: id, Sequence: msg.Sequence, TenantID: msg.TenantID, ThreadID: msg.ThreadID, Channel: msg.Channel,
		Contact: msg.Contact, ExecutionID: msg.ExecutionID, Text: msg.Body, CreatedAt: msg.CreatedAt.UTC(),
	})
	if err != nil {
		return fmt.Errorf("encoding webhook body: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(MessageIDHeader, id)
	req.Header.Set(SequenceHeader, strconv.FormatInt(msg.Sequence, 10))
	if len(c.Secret) > 0 {
		req.Header.Set(SignatureHeader, Sign(c.Secret, time.Now(), body))
	}
	client, err := c.httpClient()
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("posting message %s: %w", id, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("posting message %s: the webhook answered %d", id, resp.StatusCode)
	}
	return nil
}

// httpClient returns Client, else the channel's own outbound client, built
// once.
func (c *WebhookChannel) httpClient() (*http.Client, error) {
	if c.Client != nil {
		return c.Client, nil
	}
	c.once.Do(func() {
		allow, err := AllowListOfURL(c.URL)
		if err != nil {
			c.err = fmt.Errorf("webhook channel url: %w", err)
			return
		}
		c.client = NewOutboundClient(allow, 10*time.Second)
	})
	return c.client, c.err
}
