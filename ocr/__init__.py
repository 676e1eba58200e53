"""The ocr service: reads attachments (log files, screenshots) into text and error signatures."""
