-- Per-subject order for webhook deliveries: the deliveries of one pull
-- request (subject "owner/repo#N") are processed one at a time, in the
-- order of the event times GitHub put in their payloads (order_at), so a
-- retried "opened" cannot be applied after the "closed" that followed it.
-- Deliveries without a subject (installations, merge queues) keep no order.
ALTER TABLE webhook_inbox ADD COLUMN subject TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_inbox ADD COLUMN order_at BIGINT NOT NULL DEFAULT 0;
UPDATE webhook_inbox SET order_at = received_at;
CREATE INDEX webhook_inbox_subject ON webhook_inbox (subject, order_at) WHERE status = 'pending';
