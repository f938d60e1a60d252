"""Webhooks: endpoints a tenant registers, events from where jobs end, signed deliveries
with retries on their own queue, and the recent deliveries of each endpoint."""
