"""The quality evaluations of ``deskpilot eval``, each run on labelled data through the services'
own code: ``retrieval`` (does the knowledge base find the answering page), ``intents`` (the
orchestrator's intent learner and its refusals), ``escalation`` (the escalation checkpoint),
``redaction`` (what personal data and secrets the redactor finds), ``critique`` (how much of a
model's answer its passages support, before and after the critique) and ``ocr`` (the character error
rate of the ocr service on screenshots). ``deskpilot screenshots``
(:mod:`~deploy.evals.screenshots`) renders the screenshots with ground truth that ``eval ocr``
reads.
"""
