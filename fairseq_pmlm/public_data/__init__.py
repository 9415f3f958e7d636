"""Converters and readers of public datasets: their released files -> what the recipes read
(CNN/DailyMail and XSum as raw pairs, GLUE task folders binarized, SQuAD JSON as examples)."""
