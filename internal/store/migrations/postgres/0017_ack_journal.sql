-- How far each server instance has folded the door's ack journal (a
-- directory of segment files on its host, internal/store/journal) into
-- webhook_inbox: the next unread byte, segment and offset. It is written
-- in the transaction that inserts the folded deliveries, so a crash
-- between two folds repeats nothing and loses nothing.
CREATE TABLE ack_journal (
    instance     TEXT    PRIMARY KEY,
    segment      BIGINT  NOT NULL,
    byte_offset  BIGINT  NOT NULL
);
